// Reading PostgreSQL's plans in tests: EXPLAIN (FORMAT JSON)'s nodes, and a prepared statement's
// values written into `EXECUTE name(…)`, which EXPLAIN takes with no parameters of its own.

/** A node of EXPLAIN (FORMAT JSON)'s plan, with the fields the tests read. */
export interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: PlanNode[];
}

/** The node and every node under it, in plan order. */
export const planNodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(planNodes)];

/** A statement's values as SQL literals (text arrays with nulls, text, numbers), comma-separated. */
export const sqlLiterals = (values: readonly unknown[]): string =>
  values
    .map((v) =>
      Array.isArray(v)
        ? `'{${v.map((x) => x ?? 'NULL').join(',')}}'::text[]`
        : typeof v === 'string'
          ? `'${v.replaceAll("'", "''")}'`
          : String(v),
    )
    .join(', ');
