import Database from 'better-sqlite3';
import pg from 'pg';
import { openStore, sqlitePath } from '../src/store/index.js';
import { createToken } from '../src/tokens/tokens.js';

/** Users the seeded plants are spread over; the caller is user 0. */
export const USERS = 10;

/** The i-th seeded plant: round-robin over the users, every third one tagged. */
export function seededPlant(i: number): { owner: string; name: string; tag: string | null } {
  return { owner: `bench-${i % USERS}`, name: `plant ${i}`, tag: i % 3 === 0 ? `tag-${i % 7}` : null };
}

export interface Seeded {
  token: string;
  /** Ids of the caller's plants (targets for reads). */
  callerIds: number[];
}

/**
 * A realistic store: `plants` plants spread evenly over USERS users, a third of them tagged;
 * the caller is user 0 and owns plants/USERS of them.
 */
export async function seed(url: string, plants: number): Promise<Seeded> {
  const store = await openStore({ url, durability: 'normal', poolSize: 2 });
  await store.migrate();
  const { secret } = await createToken(store, {
    user: 'bench-0',
    scopes: ['plants:read', 'plants:write'],
    name: 'bench',
    expiresInMs: null,
  });
  await store.close();
  if (url.startsWith('sqlite:')) {
    const db = new Database(sqlitePath(url));
    const insert = db.prepare('INSERT INTO plants (owner, name, tag) VALUES (?, ?, ?)');
    db.transaction(() => {
      for (let i = 0; i < plants; i++) {
        const p = seededPlant(i);
        insert.run(p.owner, p.name, p.tag);
      }
    })();
    const ids = db
      .prepare("SELECT id FROM plants WHERE owner = 'bench-0' ORDER BY id")
      .pluck()
      .all() as number[];
    db.close();
    return { token: secret, callerIds: ids };
  }
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  // The same plants as seededPlant(), generated inside PostgreSQL.
  await c.query(
    `INSERT INTO plants (id, owner, name, tag)
     SELECT nextval('plants_id_seq'), 'bench-' || (g % $2), 'plant ' || g, CASE WHEN g % 3 = 0 THEN 'tag-' || (g % 7) END
     FROM generate_series(0, $1 - 1) g`,
    [plants, USERS],
  );
  await c.query('ANALYZE plants');
  const r = await c.query("SELECT id FROM plants WHERE owner = 'bench-0' ORDER BY id");
  await c.end();
  return { token: secret, callerIds: r.rows.map((x) => Number(x.id)) };
}
