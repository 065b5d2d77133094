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

/**
 * A statement's values as untyped SQL literals for `EXECUTE name(…)`, comma-separated: an array as
 * an untyped '{…}' literal, which takes the parameter's type (timestamptz[], tsquery[], …).
 */
export const untypedLiterals = (
  c: { escapeLiteral(s: string): string },
  values: readonly unknown[],
): string => {
  const element = (v: unknown) => (v === null ? 'NULL' : `"${String(v).replace(/["\\]/g, '\\$&')}"`);
  const literal = (v: unknown): string =>
    v === null
      ? 'NULL'
      : Array.isArray(v)
        ? c.escapeLiteral(`{${v.map(element).join(',')}}`)
        : typeof v === 'number'
          ? String(v)
          : c.escapeLiteral(String(v));
  return values.map(literal).join(', ');
};

/**
 * Runs the prepared statement `name` seven times (PostgreSQL's five custom plans, then its choice)
 * and reads how many of its calls ran a generic plan (g) and how many a custom one (c).
 */
export async function planChoices(
  c: { query(q: unknown, values?: unknown[]): Promise<{ rows: { g: number; c: number }[] }> },
  name: string,
  text: string,
  values: readonly unknown[],
): Promise<{ g: number; c: number }> {
  for (let i = 0; i < 7; i++) await c.query({ name, text, values });
  const { rows } = await c.query(
    'SELECT generic_plans::int AS g, custom_plans::int AS c FROM pg_prepared_statements WHERE name = $1',
    [name],
  );
  return rows[0]!;
}
