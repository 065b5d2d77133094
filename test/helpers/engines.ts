import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';

/** A store engine the suites run against; `skip` says why it cannot run here. */
export interface Engine {
  name: string;
  skip: string | false;
  /** A fresh, migrated, empty store of its own; the caller closes it. */
  open(): Promise<Store>;
}

const sqlite: Engine = {
  name: 'sqlite',
  skip: false,
  async open() {
    const store = new SqliteStore({ path: ':memory:', durability: 'full' });
    await store.migrate();
    return store;
  },
};

/** Every engine; suites do `for (const engine of ENGINES) describe(engine.name, { skip: engine.skip }, …)`. */
export const ENGINES: Engine[] = [sqlite];
