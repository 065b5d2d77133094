// A harness shared by the tests of one describe block: made before them, closed after them.
import { after, before } from 'node:test';
import type { AppDeps } from '../../src/app.js';
import type { Config } from '../../src/config.js';
import { type Harness, harness } from './app.js';
import type { Engine } from './engines.js';

/**
 * The enclosing describe block's harness on this engine (built by `harness` before its tests,
 * closed after them); the tests use it as they would the harness itself.
 */
export function suiteHarness(engine: Engine, config: Partial<Config> = {}, deps: AppDeps = {}): Harness {
  let h: Harness | undefined;
  before(async () => {
    h = await harness(engine, config, deps);
  });
  after(() => h?.close());
  const current = (): Harness => {
    if (!h) throw new Error('the suite harness is used before its before hook ran');
    return h;
  };
  return {
    get app() {
      return current().app;
    },
    get store() {
      return current().store;
    },
    user: (scopes) => current().user(scopes),
    close: () => current().close(),
  };
}
