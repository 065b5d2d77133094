import { PgStore } from './postgres/store.js';
import { SqliteStore } from './sqlite/store.js';
import type { Store } from './store.js';

export interface StoreOptions {
  /** `sqlite:PATH` (or `sqlite::memory:`), or `postgres://…`. */
  url: string;
  durability: 'full' | 'normal';
  /** Most connections per process (PostgreSQL). */
  poolSize: number;
  /** PostgreSQL: plan with bitmap scans off (a `deliver` process: PgOptions.orderedScans). */
  orderedScans?: boolean;
}

/** The file path in a `sqlite:` URL; `sqlite:///abs` and `sqlite:rel` both work. */
export function sqlitePath(url: string): string {
  const rest = url.slice('sqlite:'.length);
  return rest.startsWith('//') ? rest.slice(2) : rest;
}

/** Opens the store the URL names. Does not migrate. */
export async function openStore(opts: StoreOptions): Promise<Store> {
  if (opts.url.startsWith('sqlite:')) {
    return new SqliteStore({
      path: sqlitePath(opts.url),
      durability: opts.durability,
      // For comparing the two in benchmarks; the writer thread is the default.
      writer: process.env.PLANTSTORE_SQLITE_WRITER === 'inline' ? 'inline' : 'thread',
      // Likewise, FTS5's own automerge against the writer's paced merge steps (the default).
      searchMerge: process.env.PLANTSTORE_SEARCH_MERGE === 'automerge' ? 'automerge' : 'paced',
    });
  }
  if (/^postgres(ql)?:\/\//.test(opts.url))
    return new PgStore({
      url: opts.url,
      poolSize: opts.poolSize,
      ...(opts.orderedScans ? { orderedScans: true } : {}),
    });
  // The URL is not repeated: it may hold a password.
  throw new Error('unsupported database URL: use sqlite:PATH or postgres://…');
}
