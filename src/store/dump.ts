import type { StoreRecord } from '../schemas/store-file.js';
import { sqlitePath } from './index.js';

// Export and import of a whole store (contract section 12), whichever its engine: the records of
// src/schemas/store-file.ts, read from one snapshot, loaded in one transaction. Each engine's own
// SQL is in its dump.ts.

/** An import met a store that holds data already. */
export class StoreNotEmpty extends Error {}

/** A record the target store refused (a duplicate id, a member of a garden not in the file…). */
export class RecordRefused extends Error {}

/** Takes one record into the import's transaction (synchronously, or once its batch is sent). */
export type Loader = (r: StoreRecord) => void | Promise<void>;

/** Loads records into the store at `where` in one transaction, or writes nothing and throws. */
export type LoadTarget = (where: string, records: AsyncIterable<StoreRecord>) => Promise<void>;

/**
 * The tables any row of which means a store holds data (an import refuses it). Events are each
 * engine's own check: a SQLite log keeps its newest row, emptied, after a purge.
 */
export const DATA_TABLES = [
  'plants',
  'trash',
  'gardens',
  'tokens',
  'webhook_endpoints',
  'deliveries',
  'idempotency_keys',
] as const;

const isSqlite = (url: string) => url.startsWith('sqlite:');

/** The engine and schema version of the (migrated) store at `url`. */
export async function storeSchema(url: string): Promise<{ engine: string; migration: number }> {
  if (isSqlite(url)) {
    const { sqliteSchema } = await import('./sqlite/dump.js');
    return { engine: 'sqlite', migration: sqliteSchema(sqlitePath(url)) };
  }
  const { postgresSchema } = await import('./postgres/dump.js');
  return { engine: 'postgres', migration: await postgresSchema(url) };
}

/** Every record of the store at `url`, as of one commit. */
export async function* dumpStore(url: string): AsyncGenerator<StoreRecord> {
  if (isSqlite(url)) {
    const { dumpSqlite } = await import('./sqlite/dump.js');
    yield* dumpSqlite(sqlitePath(url));
  } else {
    const { dumpPostgres } = await import('./postgres/dump.js');
    yield* dumpPostgres(url);
  }
}

/** Loads `records` into the empty, migrated store at `url`, all or nothing. */
export async function loadStore(url: string, records: AsyncIterable<StoreRecord>): Promise<void> {
  if (isSqlite(url)) {
    const { loadSqlite } = await import('./sqlite/dump.js');
    return loadSqlite(sqlitePath(url), records);
  }
  const { loadPostgres } = await import('./postgres/dump.js');
  return loadPostgres(url, records);
}

/** The record a refusal was met on, for its one-line message (control characters escaped). */
export function recordName(r: StoreRecord): string {
  const name = (() => {
    switch (r.kind) {
      case 'member':
        return `member ${r.user} of garden ${r.garden}`;
      case 'delivery':
        return `delivery of ${r.event} to ${r.endpoint}`;
      case 'idempotency':
        return `idempotency key ${r.key} of ${r.user}`;
      case 'counters':
        return 'counters';
      default:
        return `${r.kind} ${r.id}`;
    }
  })();
  return name.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
