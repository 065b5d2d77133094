import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import pg from 'pg';
import { gardenId } from '../src/gardens/id.js';
import { createToken } from '../src/identity/tokens.js';
import { encodeCursor } from '../src/plants/cursor.js';
import { openStore, sqlitePath } from '../src/store/index.js';
import type { Store } from '../src/store/store.js';

/** Users the seeded plants are spread over; the caller is user 0. */
export const USERS = 10;
/** The caller in one garden (its home garden). */
export const CALLER = 'bench-0';
/**
 * The caller in SHARED_GARDENS gardens (contract 3.2: lists across gardens as fast as a single
 * garden's): user 1, whose plants — as many as the caller's, every USERS-th id, like the caller's —
 * are spread round-robin over its home garden and SHARED_GARDENS − 1 gardens that other users own
 * and have added it to as an editor.
 */
export const SHARED_CALLER = 'bench-1';
export const SHARED_GARDENS = 20;

/** The i-th seeded plant: round-robin over the users, every third one tagged. */
export function seededPlant(i: number): { owner: string; name: string; tag: string | null } {
  return { owner: `bench-${i % USERS}`, name: `plant ${i}`, tag: i % 3 === 0 ? `tag-${i % 7}` : null };
}

export interface Caller {
  user: string;
  token: string;
  /** Ids of the plants the caller sees (targets for reads), ascending. */
  ids: number[];
  /** The gardens it is a member of. */
  gardens: string[];
}

export interface Seeded {
  token: string;
  /** Ids of the caller's plants (targets for reads). */
  callerIds: number[];
  /** The caller in one garden (the same token and ids as above). */
  one: Caller;
  /** The caller in SHARED_GARDENS gardens. */
  shared: Caller;
}

const benchToken = async (store: Store, user: string) =>
  (
    await createToken(store, {
      user,
      scopes: ['plants:read', 'plants:write'],
      name: 'bench',
      expiresInMs: null,
    })
  ).secret;

/** Every user's home garden, and the shared caller's other gardens, made through the Store. */
async function makeGardens(store: Store): Promise<{ homes: string[]; shared: string[] }> {
  const at = new Date();
  const homes: string[] = [];
  for (let u = 0; u < USERS; u++) {
    homes.push((await store.homeGarden(`bench-${u}`, { id: gardenId(randomBytes), name: 'Home', at })).id);
  }
  const shared = [homes[1]!];
  for (let k = 1; k < SHARED_GARDENS; k++) {
    // Owned by the other users in turn (never the 1-garden caller), the shared caller an editor.
    const owner = `bench-${2 + ((k - 1) % (USERS - 2))}`;
    const made = await store.createGarden({ id: gardenId(randomBytes), name: `shared ${k}`, owner, at });
    if ('refused' in made) throw new Error(`createGarden: ${made.refused}`);
    const member = await store.putMember(made.ok.id, null, SHARED_CALLER, 'editor', at);
    if ('refused' in member) throw new Error(`putMember: ${member.refused}`);
    shared.push(made.ok.id);
  }
  return { homes, shared };
}

/** The garden of the i-th seeded plant: its owner's home, or for the shared caller one of its gardens in turn. */
const gardenOf = (i: number, g: { homes: string[]; shared: string[] }): string =>
  i % USERS === 1 ? g.shared[Math.floor(i / USERS) % g.shared.length]! : g.homes[i % USERS]!;

/**
 * A realistic store: `plants` plants spread evenly over USERS users, a third of them tagged, each
 * in its owner's home garden — except user 1's (SHARED_CALLER), which are spread over the 20
 * gardens it is a member of. The caller is user 0 and owns plants/USERS of them, in one garden.
 */
export async function seed(url: string, plants: number): Promise<Seeded> {
  const store = await openStore({ url, durability: 'normal', poolSize: 2 });
  await store.migrate();
  const token = await benchToken(store, CALLER);
  const sharedToken = await benchToken(store, SHARED_CALLER);
  const g = await makeGardens(store);
  await store.close();
  const callers = (ids: (user: string) => number[]): Pick<Seeded, 'one' | 'shared'> => ({
    one: { user: CALLER, token, ids: ids(CALLER), gardens: [g.homes[0]!] },
    shared: { user: SHARED_CALLER, token: sharedToken, ids: ids(SHARED_CALLER), gardens: g.shared },
  });
  if (url.startsWith('sqlite:')) {
    const db = new Database(sqlitePath(url));
    const insert = db.prepare('INSERT INTO plants (owner, garden, name, tag) VALUES (?, ?, ?, ?)');
    db.transaction(() => {
      for (let i = 0; i < plants; i++) {
        const p = seededPlant(i);
        insert.run(p.owner, gardenOf(i, g), p.name, p.tag);
      }
    })();
    const idsOf = db.prepare('SELECT id FROM plants WHERE owner = ? ORDER BY id').pluck();
    const out = callers((user) => idsOf.all(user) as number[]);
    db.close();
    return { token, callerIds: out.one.ids, ...out };
  }
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  // The same plants as seededPlant() and gardenOf(), generated inside PostgreSQL.
  await c.query(
    `INSERT INTO plants (id, owner, garden, name, tag)
     SELECT nextval('plants_id_seq'), 'bench-' || (g % $2), 
            CASE WHEN g % $2 = 1 THEN ($4::text[])[(g / $2) % $5 + 1] ELSE ($3::text[])[g % $2 + 1] END,
            'plant ' || g, CASE WHEN g % 3 = 0 THEN 'tag-' || (g % 7) END
     FROM generate_series(0, $1 - 1) g`,
    [plants, USERS, g.homes, g.shared, g.shared.length],
  );
  await c.query('ANALYZE plants');
  const ids = new Map<string, number[]>();
  for (const user of [CALLER, SHARED_CALLER]) {
    const r = await c.query('SELECT id FROM plants WHERE owner = $1 ORDER BY id', [user]);
    ids.set(
      user,
      r.rows.map((x) => Number(x.id)),
    );
  }
  await c.end();
  const out = callers((user) => ids.get(user)!);
  return { token, callerIds: out.one.ids, ...out };
}

/**
 * Paths of `count` list pages deep in each caller's list, at the same random positions for every
 * caller: a cursor after a random id below the last `limit` plants any of them sees, so each page
 * is full. Distinct positions (as many as `count` allows), so that a run visits far more pages than
 * the list cache holds and the pages are read from the store, not the cache.
 */
export function deepPages(callers: Caller[], limit: number, count: number): string[][] {
  const bound = Math.min(...callers.map((c) => c.ids[Math.max(0, c.ids.length - limit - 1)]!));
  let state = 20261124;
  const rand = () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state / 2 ** 31;
  };
  // A shuffle of 1 … bound − 1, cut to `count`.
  const ids = Array.from({ length: bound - 1 }, (_, k) => k + 1);
  for (let k = ids.length - 1; k > 0; k--) {
    const j = Math.floor(rand() * (k + 1));
    [ids[k], ids[j]] = [ids[j]!, ids[k]!];
  }
  const at = ids.slice(0, count);
  return callers.map((c) =>
    at.map((afterId) => `/plants?limit=${limit}&cursor=${encodeCursor(afterId, c.user, null, null)}`),
  );
}
