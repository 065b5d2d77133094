/** A versioned schema change; `sql` may hold several statements. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** The migrations not yet applied, in version order; throws if the list itself is malformed. */
export function pendingMigrations(all: Migration[], applied: Set<number>): Migration[] {
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
