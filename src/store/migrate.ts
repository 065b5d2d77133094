/**
 * A versioned schema change; `sql` may hold several statements. All of it runs in one transaction:
 * `sql`, then `fill` (what SQL alone cannot compute for the rows already there, such as the words
 * search indexes), then `after` (an index built once the rows it covers are filled). On PostgreSQL,
 * `concurrently` then runs outside that transaction, once it has committed: indexes built without
 * blocking writers (see concurrentIndexName below).
 *
 * A release's migrations only add (docs/operations.md, "Releases and versions"), so that one run
 * while the previous release serves breaks nothing it does. One that cannot keep to that says why
 * in `unsafeWhileServing`, and `plantstore migrate --dry-run` shows it; test/unit/migrations.test.ts
 * reads every migration and holds the rule.
 */
export interface Migration<Connection = never> {
  version: number;
  name: string;
  sql: string;
  fill?: (c: Connection) => void | Promise<void>;
  after?: string;
  /**
   * PostgreSQL only: `CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS name ON …` statements, run
   * one at a time outside the migration's transaction after it commits, so writers never wait for
   * the build. Every `migrate` checks them again, for every migration applied: an index missing
   * (the build was interrupted) is built, one left INVALID by a failed build is dropped
   * (CONCURRENTLY) and built again, a valid one is left as it is.
   */
  concurrently?: string[];
  /** Why this must not run while the previous release serves; absent when it may. */
  unsafeWhileServing?: string;
}

// The statement with its runs of white space made one space and no final ";", so that the pattern
// below has one way to match it (linear time: test/unit/redos.test.ts).
const CONCURRENT_INDEX = /^CREATE (?:UNIQUE )?INDEX CONCURRENTLY IF NOT EXISTS (\w+) ON \w+(?: [^;]*)?$/i;

/**
 * The index a `concurrently` statement builds, or undefined when it is not the only statement a
 * migration's `concurrently` may hold: one `CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS name
 * ON table …`. `IF NOT EXISTS` makes a run again harmless (a store that built it some other way
 * keeps its index).
 */
export function concurrentIndexName(statement: string): string | undefined {
  const one = statement.trim().replace(/\s+/g, ' ').replace(/ ?;$/, '');
  return CONCURRENT_INDEX.exec(one)?.[1];
}

/** A migration not yet applied, as `migrate --dry-run` lists it. */
export interface PendingMigration {
  version: number;
  name: string;
  /** Why it must not run while the previous release serves; absent when it may. */
  unsafeWhileServing?: string;
}

/** The store's schema is newer than the newest migration this plantstore knows. */
export class NewerSchemaError extends Error {
  constructor(
    /** The store's schema version. */
    readonly schema: number,
    /** The newest this plantstore knows. */
    readonly known: number,
  ) {
    super(`the store is at schema version ${schema}, newer than this plantstore knows (${known})`);
    this.name = 'NewerSchemaError';
  }
}

/** The migrations not yet applied, in version order; throws if the list itself is malformed. */
export function pendingMigrations<M extends Migration<never>>(all: M[], applied: Set<number>): M[] {
  const sorted = [...all].sort((a, b) => a.version - b.version);
  sorted.forEach((m, i) => {
    if (m.version !== i + 1)
      throw new Error(`migration versions must be 1, 2, 3 …; found ${m.version} at ${i + 1}`);
  });
  const newest = Math.max(0, ...applied);
  if (newest > sorted.length) throw new NewerSchemaError(newest, sorted.length);
  return sorted.filter((m) => !applied.has(m.version));
}

/** What `migrate --dry-run` shows of a migration: no SQL, no fill. */
export function described(m: Migration<never>): PendingMigration {
  return {
    version: m.version,
    name: m.name,
    ...(m.unsafeWhileServing ? { unsafeWhileServing: m.unsafeWhileServing } : {}),
  };
}
