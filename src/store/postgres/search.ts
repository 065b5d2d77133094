import type pg from 'pg';
import { indexedWords } from '../../search-text.js';
import type { PagePlant, PageQuery } from '../store.js';
import { gardenPage, mergedIds, P } from './plant-queries.js';

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
 * PostgreSQL keeps (no parse or plan a call). The gardens' plants after the cursor are read in id
 * order, merged across the gardens as a first sync's pages are (plant-queries.ts, mergedIds):
 * each garden's ids along its page index (an index-only scan), the gardens' ids under a Merge
 * Append in id order that pulls from a garden only as the merge needs it, cut at `budget` ids
 * (walkBudget); then each garden's plants among those ids, read along the same index, each kept if
 * it matches (with a tag, each id's plant by its primary key, stopping at the page's `limit`-th
 * match: walkOf). So a page without a tag reads the plants up to the budget in id order (or to the
 * gardens' end), in whichever gardens they are: a few pages of the table a garden where imports
 * wrote its plants together, up to a page a plant where they are interleaved with others'. A dense
 * term reads the budget's plants (200 for a page of 20) though its matches lie in the first few.
 * Read by id, as the merge first had it, each plant cost four buffers (the primary key's descent
 * and the row): on a 10,000,000-plant store a search cost PostgreSQL 626-686 µs, against 323-341
 * read along the gardens' index (docs/benchmarks.md). A walk that reaches its budget before
 * `limit` matches adds a marker row (`cut`) at its last plant: every match up to there is known,
 * in every garden, and the rest of the page is read from there by a later walk or by searchPage,
 * which the planner plans for the terms (a rare term along the GIN index). A garden padded with
 * null reads nothing: its ids' branch is skipped by a one-time filter, and its plants' by `LIMIT 0`.
 *
 * Each garden was walked on its own before, `budget` plants a garden (50 of each of 4), its
 * matches sorted and then merged: its garden was asked as `= ANY (ARRAY[g])` so that the generic
 * plan could not walk the primary key filtering by garden, and so the planner did not know the
 * walk was in id order. Where a store was filled one import at a time (each garden's plants in runs
 * of ids), the page's matches lay in one or two gardens, whose walks stopped short, and a second
 * walk went on in them: on `bench/size.ts`'s store of 10,000,000 plants a first page of `mon` read
 * 412 plants in 2.06 statements on average over 100 callers, merged 202 in 1.01 (an emulation of
 * both on that layout; 24 and 24 at 100,000). The primary key's walk is avoided here as for the
 * first sync's pages: a branch reads ids alone, which the garden's index holds, so the planner
 * weighs an index-only scan against the primary key's walk of the table and takes the index once
 * the table is vacuumed (the planner's choice, never a wrong answer).
 *
 * Because each garden's walk is an index scan, never a bitmap one, it marks the index entries of
 * deleted plants dead as it meets them (an index-only scan reads the table for a page not all
 * visible, and marks an entry whose row is dead to every transaction), which a bitmap scan never
 * does: after 40,000 creates and deletes in a caller's 4 gardens of a 1,000,000-plant store (not
 * vacuumed), searchPage's bitmap plan read every deleted row's heap tuple on every search (303
 * searches/s, 5.7 ms of the backends' CPU each); a walk, 855/s and 1.4 ms from the first search on
 * (docs/benchmarks.md, "How cost grows with size").
 */
// The walk of the gardens `gs` (expressions; a null one reads nothing), with the terms, cursor,
// budget, limit and tag (none: any) as the expressions of `p`. First the gardens' ids after the
// cursor, merged in id order and cut at the budget. Without a tag, `e` holds the last of them,
// whether the budget was reached, and how many each garden gave (c1 …), and then each garden's
// first that many plants after the cursor are read along its page index, as a list page reads them
// (gardenPage: spelt so that the generic plan cannot walk the primary key filtering by garden,
// which PostgreSQL chose, on a store of few gardens, when a garden was asked as `garden = g`
// ordered by id), each tested against the terms: a few pages of the table a garden, where imports
// wrote its plants together. With a tag, each merged id's plant is read by its id: no spelling
// held there (ordered by (garden, tag, id), PostgreSQL read a small store's garden along
// plants_garden_page and sorted it; asked as `garden = g AND tag = t` ordered by id, it walked
// plants_tag_id filtering by garden). Then the matches and the marker row, in id order, cut at the
// limit.
const walkOf = (
  gs: readonly string[],
  p: { q: string; after: string; budget: string; limit: string; tag?: string },
) => {
  if (p.tag) {
    const ids = mergedIds(gs, { after: p.after, limit: p.budget, tag: p.tag });
    return `SELECT u.id, w.garden, w.name, w.tag, w.version, w.hit, u.k = ${p.budget} AS cut FROM (
      SELECT id, row_number() OVER (ORDER BY id) AS k FROM (${ids}) m) u
    CROSS JOIN LATERAL (SELECT garden, name, tag, version, search @@ ${p.q} AS hit
      FROM plants WHERE plants.id = u.id LIMIT 1) w
    WHERE w.hit OR u.k = ${p.budget} ORDER BY u.id LIMIT ${p.limit}`;
  }
  const ids = mergedIds(gs, { after: p.after, limit: p.budget, branch: true });
  const counts = gs.map((_, i) => `count(*) FILTER (WHERE b = ${i + 1}) AS c${i + 1}`).join(', ');
  const plants = gs
    .map((g, i) => `(${gardenPage(`${COLS}, search @@ ${p.q} AS hit`, g, null, p.after, `e.c${i + 1}`)})`)
    .join(' UNION ALL ');
  return `SELECT w.id, w.garden, w.name, w.tag, w.version, w.hit, e.filled AND w.id = e.hi AS cut FROM (
      SELECT max(id) AS hi, count(*) = ${p.budget} AS filled, ${counts} FROM (${ids}) m) e
    CROSS JOIN LATERAL (${plants}) w
    WHERE w.hit OR (e.filled AND w.id = e.hi) ORDER BY w.id LIMIT ${p.limit}`;
};
/**
 * How many gardens each single walk's statement takes (padded with null), as the list's merged
 * pages; the batched statements take 8. Past 8 the planned statement answers; the merged walk could
 * serve 16 or 32 gardens as the first sync's pages do, not measured.
 */
const WALK_SIZES = [2, 4, 8] as const;
type WalkSize = (typeof WALK_SIZES)[number];
const WALK_MAX_GARDENS = WALK_SIZES[WALK_SIZES.length - 1]!;
/** The single walks' statements (searchWalks is the batched one). */
type WalkName = `searchWalk${WalkSize}` | `searchWalkTag${WalkSize}`;

/**
 * The walks of several searches without a tag in one statement (the searches that arrive in one
 * turn of the event loop, as the list's pages are batched: plant-reads.ts): each search a row of
 * `q`, its gardens in the columns g1 … g`slots` (null past its own), and each row of the answer
 * tagged with its search's ordinal n. Each search's walk is walkOf's, its values read from its row
 * of `q`. A single walk is the same statement with one row, and as many slots as its gardens need
 * (WALK_SIZES). Each array is read through a subquery, `(SELECT $1::text[])`, as listPages' are
 * (plant-queries.ts): a bare parameter's length is known to a plan made for the call's values and
 * not to the generic one, so PostgreSQL judged every generic plan dearer and planned each call
 * afresh. A single walk took its values as bare parameters before (the gardens as `$1[i]`, the
 * cursor, budget and limit as scalars); whether PostgreSQL kept its generic plan then hung on the
 * table's statistics: on one build of a 10,000,000-plant store it planned every call afresh (12
 * custom plans of 12; 0.47 ms of planning a call), 615-745 µs of a backend a walk against 225-245
 * as one row of this statement (bench/search-walk-cost.ts); on a second build of the same store
 * it kept the generic plan, 225-235 µs either way; at 100,000 it kept it too (90-105 µs; one row
 * of this statement 100-120).
 * Searches with a tag have a statement of their own (`tagged`: every row a tag, in one more
 * column): the tag is an index condition of a garden's walk only when every row has one, which a
 * shared statement's `tag IS NULL OR` would undo.
 */
const walksStatement = (n: number, tagged: boolean): string => {
  const slots = Array.from({ length: n }, (_, i) => i + 1);
  const cols = slots.map((i) => `g${i}`).join(', ');
  const arrays = slots.map((i) => P(i, 'text[]')).join(', ');
  const tag = tagged ? [`, ${P(n + 5, 'text[]')}`, ', tag'] : ['', ''];
  const walk = walkOf(
    slots.map((i) => `q.g${i}`),
    {
      q: 'q.terms',
      after: 'q.after_id',
      budget: 'q.budget',
      limit: 'q.lim',
      ...(tagged ? { tag: 'q.tag' } : {}),
    },
  );
  return `WITH q AS (SELECT * FROM unnest(${arrays}, ${P(n + 1, 'tsquery[]')}, ${P(n + 2, 'bigint[]')},
      ${P(n + 3, 'bigint[]')}, ${P(n + 4, 'bigint[]')}${tag[0]}) WITH ORDINALITY AS q(${cols}, terms, after_id, budget, lim${tag[1]}, n))
    SELECT q.n, u.* FROM q CROSS JOIN LATERAL (${walk}) u`;
};

export const SEARCH_QUERIES = {
  ...(Object.fromEntries(
    WALK_SIZES.flatMap((n) => [
      [`searchWalk${n}`, walksStatement(n, false)],
      [`searchWalkTag${n}`, walksStatement(n, true)],
    ]),
  ) as Record<WalkName, string>),
  searchWalks: walksStatement(WALK_MAX_GARDENS, false),
  searchWalksTag: walksStatement(WALK_MAX_GARDENS, true),
};

/**
 * Plants a walk reads at most, for a page of `limit`: ten pages' worth, at least 50. So a term no
 * plant of the gardens has costs the walk ten pages of plants (200 for a page of 20) before the
 * planned statement.
 */
const walkBudget = (limit: number): number => Math.max(50, 10 * limit);
/** Pages longer than this (an export's) are read by searchPage alone: their walk would be long. */
const WALK_MAX_LIMIT = 200;

/** The walk's statement and values for `q` alone, or null when searchPage answers alone. */
export function searchWalk(q: PageQuery & { terms: string[] }): [WalkName, unknown[]] | null {
  const w = walkArgs(q);
  return w === null ? null : walkCall(w);
}

/** The statement and values of one walk alone: one row, in the fewest slots its gardens fit. */
export function walkCall(w: WalkArgs): [WalkName, unknown[]] {
  const n = WALK_SIZES.find((size) => size >= w.gardens.length)!;
  return [w.tag === null ? `searchWalk${n}` : `searchWalkTag${n}`, walkValues([w], n)];
}

/** A search the walk answers (searchWalk), as one row of searchWalks. */
export interface WalkArgs {
  gardens: string[];
  tsquery: string;
  afterId: number;
  budget: number;
  tag: string | null;
  limit: number;
}

/** The walk's arguments for `q`, or null when searchPage answers alone (as searchWalk). */
export function walkArgs(q: PageQuery & { terms: string[] }): WalkArgs | null {
  const gardens = q.gardens === null ? null : [...new Set(q.gardens)];
  if (gardens === null || gardens.length === 0 || gardens.length > WALK_MAX_GARDENS) return null;
  if (q.limit > WALK_MAX_LIMIT) return null;
  return {
    gardens,
    tsquery: tsquery(q.terms),
    afterId: q.afterId,
    budget: walkBudget(q.limit),
    tag: q.tag,
    limit: q.limit,
  };
}

/**
 * The batched statement and its values for these walks: searchWalks when none has a tag,
 * searchWalksTag when every one has one (the caller never mixes them).
 */
export function walksCall(walks: readonly WalkArgs[]): ['searchWalks' | 'searchWalksTag', unknown[]] {
  const tagged = walks[0]?.tag != null;
  if (walks.some((w) => (w.tag !== null) !== tagged))
    throw new Error('walksCall: tagged and untagged walks mixed');
  return [tagged ? 'searchWalksTag' : 'searchWalks', walkValues(walks, WALK_MAX_GARDENS)];
}

/** The values of walksStatement(n, …) for these walks (all with a tag, or none). */
function walkValues(walks: readonly WalkArgs[], n: number): unknown[] {
  const slots = Array.from({ length: n }, (_, i) => walks.map((w) => w.gardens[i] ?? null));
  const values = [
    ...slots,
    walks.map((w) => w.tsquery),
    walks.map((w) => w.afterId),
    walks.map((w) => w.budget),
    walks.map((w) => w.limit),
  ];
  return walks[0]?.tag != null ? [...values, walks.map((w) => w.tag)] : values;
}

export interface WalkRow extends PagePlant {
  hit: boolean;
  cut: boolean;
}

/** Walks after the first that a search page may take before the planned statement finishes it. */
const MORE_ROUNDS = 2;

/**
 * A search page read by walks (search.ts: the walk), round by round. Each round's rows say how far
 * the gardens' matches are known: to its marker (`cut`), or, when the round's answer was cut at
 * `limit` rows, to the last of them, or, with neither, to the gardens' end. The page is whole once
 * `limit` matches are known or the gardens' end was reached. Otherwise a later round walks on from
 * the known end, up to MORE_ROUNDS more, unless the rounds so far found fewer than a quarter page
 * of matches (a rare term: the planned statement, along the word index, is the better read); then
 * `rest` says where the planned statement reads on from. Each round starts strictly after the
 * known end, so no plant is counted twice, whatever snapshot each round read.
 */
export class SearchWalk {
  private matches: PagePlant[] = [];
  private end: number;
  private done = false;
  private rounds = 0;

  constructor(private readonly first: WalkArgs) {
    this.end = first.afterId;
  }

  private get limit(): number {
    return this.first.limit;
  }

  /** Takes one round's rows. */
  take(rows: readonly WalkRow[]): void {
    this.rounds++;
    for (const r of rows) {
      if (r.hit)
        this.matches.push({ id: r.id, garden: r.garden, name: r.name, tag: r.tag, version: r.version });
    }
    const last = rows[rows.length - 1];
    if (last !== undefined && (rows.length === this.limit || last.cut))
      this.end = Math.max(this.end, last.id);
    else this.done = true;
  }

  /** The page, when the rounds so far make it whole. */
  page(): PagePlant[] | null {
    if (this.done || this.matches.length >= this.limit) return this.matches.slice(0, this.limit);
    return null;
  }

  /** The next round's walk, or null when the planned statement is to finish the page. */
  next(): WalkArgs | null {
    if (this.rounds > MORE_ROUNDS || this.matches.length < Math.ceil(this.limit / 4)) return null;
    return { ...this.first, afterId: this.end };
  }

  /** What the planned statement finishes: the matches known, and the id it reads on from. */
  rest(): { page: PagePlant[]; from: number } {
    return { page: this.matches, from: this.end };
  }
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
