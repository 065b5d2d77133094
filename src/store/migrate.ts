/**
 * A versioned schema change; `sql` may hold several statements. All of it runs in one transaction:
 * `sql`, then `fill` (what SQL alone cannot compute for the rows already there, such as the words
 * search indexes), then `after` (an index built once the rows it covers are filled).
 */
export interface Migration<Connection = never> {
  version: number;
  name: string;
  sql: string;
  fill?: (c: Connection) => void | Promise<void>;
  after?: string;
}

/** The migrations not yet applied, in version order; throws if the list itself is malformed. */
export function pendingMigrations<M extends Migration<never>>(all: M[], applied: Set<number>): M[] {
  const sorted = [...all].sort((a, b) => a.version - b.version);
  sorted.forEach((m, i) => {
    if (m.version !== i + 1)
      throw new Error(`migration versions must be 1, 2, 3 …; found ${m.version} at ${i + 1}`);
  });
  const newest = Math.max(0, ...applied);
  if (newest > sorted.length) {
    throw new Error(
      `the store is at schema version ${newest}, newer than this plantstore (${sorted.length})`,
    );
  }
  return sorted.filter((m) => !applied.has(m.version));
}
