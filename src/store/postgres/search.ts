import type pg from 'pg';
import { indexedWords } from '../../search-text.js';
import type { PagePlant, PageQuery } from '../store.js';

// Search on PostgreSQL (contract 2's `q`): each plant's folded words (search-text.ts) in the
// tsvector column `search`, written by every create and rename in its own statement, under a GIN
// index; a term is a prefix query on them (`'term':*`). The terms hold letters and digits only, so
// the query is built as tsquery text, never parsed by a text-search configuration.

/** The tsquery of the terms: every one a word prefix. */
export const tsquery = (terms: readonly string[]): string => terms.map((t) => `'${t}':*`).join(' & ');

const COLS = 'id, garden, name, tag, version';

/**
 * A search page's statement and values. Across gardens, each garden's matches are read on their
 * own and merged in id order, as the list's pages are (plant-queries.ts): the planner picks, per
 * call and for the terms given (never a generic plan), between the garden's page index filtered by
 * the match and the GIN index's matches sorted.
 */
export function searchPage(q: PageQuery & { terms: string[] }): { text: string; values: unknown[] } {
  const values: unknown[] = [tsquery(q.terms), q.afterId, q.limit];
  const tag = q.tag === null ? '' : ` AND tag = $${values.push(q.tag)}`;
  if (q.gardens === null) {
    return {
      text: `SELECT ${COLS} FROM plants WHERE search @@ $1::tsquery AND id > $2${tag} ORDER BY id LIMIT $3`,
      values,
    };
  }
  const gardens = `$${values.push([...new Set(q.gardens)])}::text[]`;
  return {
    text: `SELECT p.* FROM unnest(${gardens}) AS g(id) CROSS JOIN LATERAL (
        SELECT ${COLS} FROM plants WHERE garden = g.id AND search @@ $1::tsquery AND id > $2${tag}
        ORDER BY id LIMIT $3) p
      ORDER BY p.id LIMIT $3`,
    values,
  };
}

/**
 * The walk: a search page across 1 to 8 gardens as a prepared statement, whose generic plan
 * PostgreSQL keeps (no parse or plan a call). Each garden's plants after the cursor are walked in
 * id order along its page index, at most `budget` of them (walkBudget), keeping the matches, and
 * the gardens' matches merged in id order, a garden padded with null reading nothing. A walk that
 * reaches its budget before `limit` matches adds a marker row (`cut`) at its last plant: every
 * match up to there is known, and the rest of the page is read from there by searchPage, which the
 * planner plans for the terms (a rare term along the GIN index). So a term common in the caller's
 * gardens costs one walk of at most the budget in each garden, and a rare one that more than
 * searchPage alone.
 *
 * The garden is asked as `= ANY (ARRAY[g])` and the walk ordered by (garden, id): asked as
 * `= g`, the garden is a constant to the planner, the order is id alone, and the generic plan of a
 * store of few gardens walked the primary key filtering by garden (for a small garden, the whole
 * table); no index but the garden's gives (garden, id). The price: the planner no longer knows a
 * garden's walk is in id order, so it sorts each garden's matches and the merge reads every walk
 * to its budget (about 200 plants in all for a page of 20). That is why the walk stops at 8
 * gardens: on 1,000,000 plants a caller in 20 gardens cost PostgreSQL 1.2–1.8 ms a search walked
 * this way, against 0.8–1.5 ms planned (`= g`, merged lazily, 0.64–0.86 ms, but not safe).
 *
 * Because the walk is an index scan, never a bitmap one, it marks the index entries of deleted
 * plants dead as it meets them, which a bitmap scan never does: after 40,000 creates and deletes
 * in a caller's 4 gardens of a 1,000,000-plant store (not vacuumed), searchPage's bitmap plan read
 * every deleted row's heap tuple on every search (303 searches/s, 5.7 ms of the backends' CPU
 * each); the walk, 855/s and 1.4 ms from the first search on (docs/benchmarks.md, "How cost grows
 * with size").
 */
const walkBranch = (
  slot: number,
  tag: boolean,
  p: { q: string; after: string; budget: string; limit: string },
) => {
  const g = `($1::text[])[${slot}]`;
  return `(SELECT id, garden, name, tag, version, hit, n = ${p.budget} AS cut FROM (
      SELECT id, garden, name, tag, version, search @@ ${p.q} AS hit, row_number() OVER (ORDER BY garden, id) AS n
      FROM plants WHERE ${g} IS NOT NULL AND garden = ANY (ARRAY[${g}])${tag ? ' AND tag = $5::text' : ''} AND id > ${p.after}
      ORDER BY garden, id LIMIT ${p.budget}) w
    WHERE hit OR n = ${p.budget} ORDER BY id LIMIT ${p.limit})`;
};
const walkStatement = (n: number, tag: boolean) => {
  // $1 the gardens, $2 the terms, $3 the cursor's id, $4 the budget, then the tag (with one), the limit.
  const p = {
    q: '$2::tsquery',
    after: '$3::bigint',
    budget: '$4::bigint',
    limit: tag ? '$6::bigint' : '$5::bigint',
  };
  const branches = Array.from({ length: n }, (_, i) => walkBranch(i + 1, tag, p));
  return `SELECT * FROM (${branches.join(' UNION ALL ')}) u ORDER BY id LIMIT ${p.limit}`;
};
/** How many gardens each walk statement takes (padded with null), as the list's merged pages. */
const WALK_SIZES = [2, 4, 8] as const;
type WalkSize = (typeof WALK_SIZES)[number];
export const SEARCH_QUERIES = Object.fromEntries(
  WALK_SIZES.flatMap((n) => [
    [`searchWalk${n}`, walkStatement(n, false)],
    [`searchWalkTag${n}`, walkStatement(n, true)],
  ]),
) as Record<`searchWalk${WalkSize}` | `searchWalkTag${WalkSize}`, string>;

/**
 * Plants each garden's walk reads at most, for a page of `limit` across `gardens` gardens: ten
 * pages' worth between them, at least 50 a garden. So a term no plant of the gardens has costs
 * the walk about ten pages of plants (400 at most for a page of 20) before the planned statement.
 */
const walkBudget = (limit: number, gardens: number): number =>
  Math.max(50, Math.ceil((10 * limit) / gardens));
/** Pages longer than this (an export's) are read by searchPage alone: their walk would be long. */
const WALK_MAX_LIMIT = 200;

/** The walk's statement and values for `q`, or null when searchPage answers alone. */
export function searchWalk(
  q: PageQuery & { terms: string[] },
): [keyof typeof SEARCH_QUERIES, unknown[]] | null {
  const gardens = q.gardens === null ? null : [...new Set(q.gardens)];
  if (gardens === null || gardens.length === 0 || q.limit > WALK_MAX_LIMIT) return null;
  const n = WALK_SIZES.find((size) => size >= gardens.length);
  if (n === undefined) return null;
  const padded = [...gardens, ...Array<null>(n - gardens.length).fill(null)];
  const head = [padded, tsquery(q.terms), q.afterId, walkBudget(q.limit, gardens.length)];
  return q.tag === null
    ? [`searchWalk${n}`, [...head, q.limit]]
    : [`searchWalkTag${n}`, [...head, q.tag, q.limit]];
}

export interface WalkRow extends PagePlant {
  hit: boolean;
  cut: boolean;
}

/**
 * The page the walk's rows make: its matches up to the first marker, and where the rest of the
 * page is to be read from (the marker's id), or null when the page is whole.
 */
export function walkPage(
  rows: readonly WalkRow[],
  limit: number,
): { page: PagePlant[]; from: number | null } {
  const page: PagePlant[] = [];
  for (const r of rows) {
    if (r.hit) page.push({ id: r.id, garden: r.garden, name: r.name, tag: r.tag, version: r.version });
    if (page.length === limit) return { page, from: null };
    if (r.cut) return { page, from: r.id };
  }
  return { page, from: null };
}

/** Fills `search` for the plants already stored (migration 12), a slice of ids at a time. */
export async function fillSearch(c: pg.PoolClient): Promise<void> {
  for (let after = 0; ; ) {
    const { rows } = await c.query<{ id: number; name: string }>(
      'SELECT id, name FROM plants WHERE id > $1 ORDER BY id LIMIT 5000',
      [after],
    );
    if (rows.length === 0) return;
    await c.query(
      `UPDATE plants p SET search = array_to_tsvector(string_to_array(w.words, ' '))
       FROM unnest($1::bigint[], $2::text[]) AS w(id, words) WHERE p.id = w.id`,
      [rows.map((r) => r.id), rows.map((r) => indexedWords(r.name))],
    );
    after = rows[rows.length - 1]!.id;
  }
}
