// The change feed (contract 13.4) as a client keeps a copy with it, and the list it must equal.
import assert from 'node:assert/strict';
import type { Store } from '../../src/store/store.js';
import type { Client } from './app.js';
import { nextLink } from './gardens.js';
import { until } from './wait.js';

/**
 * Waits until every event committed to the store lies before the log's head (on PostgreSQL a
 * transaction anywhere in the cluster, such as another test's migration, holds the head back for a
 * while; meanwhile the feed answers those events' plants again and again): after it, an answer
 * holds exactly what changed since its position. SQLite: at once.
 */
export async function settled(store: Store): Promise<void> {
  await until('the log head to pass every committed event', async () => {
    const head = await store.headPosition();
    return (await store.committedEvents({ after: head, gardens: null, limit: 1 })).length === 0;
  });
}

/** A plant as the copy and the list hold it. */
export interface Held {
  garden: string;
  version: number;
  name: string;
  tag?: string;
}
export type Change =
  | { id: number; op: 'upsert'; plant: Held & { id: number } }
  | { id: number; op: 'delete' };
export interface FeedAnswer {
  changes: Change[];
  next: string;
  more: boolean;
}

/** A syncing client's copy: its plants by id and its position (null: none yet). */
export interface Copy {
  plants: Map<number, Held>;
  since: string | null;
}
export const emptyCopy = (): Copy => ({ plants: new Map(), since: null });

/** GET /plants/changes with these parameters (as it comes back). */
export const changesOf = (c: Client, params: Record<string, string | undefined> = {}) => {
  const q = Object.entries(params)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${encodeURIComponent(v!)}`)
    .join('&');
  return c.request({ method: 'GET', url: `/plants/changes${q ? `?${q}` : ''}` });
};

/** One answer (200 asserted), applied to the copy; each id at most once in it is asserted too. */
export async function step(
  c: Client,
  copy: Copy,
  opts: { limit?: number; garden?: string } = {},
): Promise<FeedAnswer> {
  const res = await changesOf(c, {
    since: copy.since ?? undefined,
    limit: opts.limit === undefined ? undefined : String(opts.limit),
    garden: opts.garden,
  });
  assert.equal(res.statusCode, 200, res.body);
  const a = res.json() as FeedAnswer;
  const ids = a.changes.map((ch) => ch.id);
  assert.equal(new Set(ids).size, ids.length, `an id more than once in one answer: ${ids}`);
  if (opts.limit !== undefined) assert.ok(a.changes.length <= opts.limit, 'more changes than the limit');
  for (const ch of a.changes) {
    if (ch.op === 'upsert') {
      const { id, ...held } = ch.plant;
      assert.equal(id, ch.id);
      copy.plants.set(ch.id, held);
    } else copy.plants.delete(ch.id);
  }
  copy.since = a.next;
  return a;
}

/** Answers until `more` is false (at most `most`); how many it took. */
export async function syncUp(
  c: Client,
  copy: Copy,
  opts: { limit?: number; garden?: string; most?: number } = {},
): Promise<number> {
  for (let n = 1; n <= (opts.most ?? 10_000); n++) {
    if (!(await step(c, copy, opts)).more) return n;
  }
  throw new Error('the feed said more for too long');
}

/** Every plant GET /plants?include=id,garden,version lists (with `garden`: that garden's). */
export async function listed(c: Client, garden?: string): Promise<Map<number, Held>> {
  const out = new Map<number, Held>();
  let url: string | null = `/plants?include=id,garden,version&limit=1000${garden ? `&garden=${garden}` : ''}`;
  while (url !== null) {
    const res = await c.request({ method: 'GET', url });
    assert.equal(res.statusCode, 200, res.body);
    for (const p of res.json() as (Held & { id: number })[]) {
      const { id, ...held } = p;
      out.set(id, held);
    }
    url = nextLink(res);
  }
  return out;
}

/** The copy, sorted by id, for comparing. */
export const sorted = (m: Map<number, Held>) => [...m].sort((a, b) => a[0] - b[0]);
