import type pg from 'pg';
import { indexedWords } from '../../search-text.js';
import type { PagePlant, PageQuery } from '../store.js';
import { P } from './plant-queries.js';

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
// One garden's walk: the garden `g` (an expression; null: none), and the terms, cursor, budget,
// limit and tag (none: any) as the expressions of `p`.
const walkBranch = (
  g: string,
  p: { q: string; after: string; budget: string; limit: string; tag?: string },
) =>
  `(SELECT id, garden, name, tag, version, hit, n = ${p.budget} AS cut FROM (
      SELECT id, garden, name, tag, version, search @@ ${p.q} AS hit, row_number() OVER (ORDER BY garden, id) AS n
      FROM plants WHERE ${g} IS NOT NULL AND garden = ANY (ARRAY[${g}])${p.tag ? ` AND tag = ${p.tag}` : ''} AND id > ${p.after}
      ORDER BY garden, id LIMIT ${p.budget}) w
    WHERE hit OR n = ${p.budget} ORDER BY id LIMIT ${p.limit})`;
const walkStatement = (n: number, tag: boolean) => {
  // $1 the gardens, $2 the terms, $3 each garden's cursor (the id its walk starts after), $4 the
  // budget, then the tag (with one), the limit.
  const p = {
    q: '$2::tsquery',
    budget: '$4::bigint',
    limit: tag ? '$6::bigint' : '$5::bigint',
    ...(tag ? { tag: '$5::text' } : {}),
  };
  const branches = Array.from({ length: n }, (_, i) =>
    walkBranch(`($1::text[])[${i + 1}]`, { ...p, after: `($3::bigint[])[${i + 1}]` }),
  );
  return `SELECT * FROM (${branches.join(' UNION ALL ')}) u ORDER BY id LIMIT ${p.limit}`;
};
/** How many gardens each walk statement takes (padded with null), as the list's merged pages. */
const WALK_SIZES = [2, 4, 8] as const;
type WalkSize = (typeof WALK_SIZES)[number];
const WALK_MAX_GARDENS = WALK_SIZES[WALK_SIZES.length - 1]!;
/** The single walks' statements (searchWalks is the batched one). */
type WalkName = `searchWalk${WalkSize}` | `searchWalkTag${WalkSize}`;

/**
 * The walks of several searches without a tag in one statement (the searches that arrive in one
 * turn of the event loop, as the list's pages are batched: plant-reads.ts): each search a row of
 * `q`, its gardens in the columns g1 … g8 (null past its own), and each row of the answer tagged
 * with its search's ordinal n. Each search's walk is walkStatement's, its values read from its row
 * of `q` instead of from parameters. Each array is read through a subquery, `(SELECT $1::text[])`,
 * as listPages' are (plant-queries.ts): a bare parameter's length is known to a plan made for the
 * call's values and not to the generic one, so PostgreSQL judged every generic plan dearer and
 * planned each call afresh. Searches with a tag have a statement of their own (`tagged`: every
 * row a tag, in one more column): the tag is an index condition of a garden's walk only when
 * every row has one, which a shared statement's `tag IS NULL OR` would undo.
 */
const walksStatement = (tagged: boolean): string => {
  const slots = Array.from({ length: WALK_MAX_GARDENS }, (_, i) => i + 1);
  const p = {
    q: 'q.terms',
    after: 'q.after_id',
    budget: 'q.budget',
    limit: 'q.lim',
    ...(tagged ? { tag: 'q.tag' } : {}),
  };
  const branch = (slot: number) => walkBranch(`q.g${slot}`, p);
  const cols = slots.map((i) => `g${i}`).join(', ');
  const arrays = slots.map((i) => P(i, 'text[]')).join(', ');
  const k = WALK_MAX_GARDENS;
  const tag = tagged ? [`, ${P(k + 5, 'text[]')}`, ', tag'] : ['', ''];
  return `WITH q AS (SELECT * FROM unnest(${arrays}, ${P(k + 1, 'tsquery[]')}, ${P(k + 2, 'bigint[]')},
      ${P(k + 3, 'bigint[]')}, ${P(k + 4, 'bigint[]')}${tag[0]}) WITH ORDINALITY AS q(${cols}, terms, after_id, budget, lim${tag[1]}, n))
    SELECT q.n, u.* FROM q CROSS JOIN LATERAL (SELECT * FROM (${slots.map(branch).join(' UNION ALL ')}) u
      ORDER BY id LIMIT ${p.limit}) u`;
};

export const SEARCH_QUERIES = {
  ...(Object.fromEntries(
    WALK_SIZES.flatMap((n) => [
      [`searchWalk${n}`, walkStatement(n, false)],
      [`searchWalkTag${n}`, walkStatement(n, true)],
    ]),
  ) as Record<WalkName, string>),
  searchWalks: walksStatement(false),
  searchWalksTag: walksStatement(true),
};

/**
 * Plants each garden's walk reads at most, for a page of `limit` across `gardens` gardens: ten
 * pages' worth between them, at least 50 a garden. So a term no plant of the gardens has costs
 * the walk about ten pages of plants (400 at most for a page of 20) before the planned statement.
 */
const walkBudget = (limit: number, gardens: number): number =>
  Math.max(50, Math.ceil((10 * limit) / gardens));
/** Pages longer than this (an export's) are read by searchPage alone: their walk would be long. */
const WALK_MAX_LIMIT = 200;

/** The walk's statement and values for `q` alone, or null when searchPage answers alone. */
export function searchWalk(q: PageQuery & { terms: string[] }): [WalkName, unknown[]] | null {
  const w = walkArgs(q);
  return w === null ? null : walkCall(w);
}

/** The statement and values of one walk alone. */
export function walkCall(w: WalkArgs): [WalkName, unknown[]] {
  const n = WALK_SIZES.find((size) => size >= w.gardens.length)!;
  const padded = [...w.gardens, ...Array<null>(n - w.gardens.length).fill(null)];
  const afters = w.gardens.map((_, i) => w.afters?.[i] ?? w.afterId);
  const head = [padded, w.tsquery, [...afters, ...Array<number>(n - afters.length).fill(0)], w.budget];
  return w.tag === null
    ? [`searchWalk${n}`, [...head, w.limit]]
    : [`searchWalkTag${n}`, [...head, w.tag, w.limit]];
}

/** A search the walk answers (searchWalk), as one row of searchWalks. */
export interface WalkArgs {
  gardens: string[];
  tsquery: string;
  afterId: number;
  /** Each garden's own cursor, in the order of `gardens` (a later round of SearchWalk); else afterId for all. */
  afters?: number[];
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
    budget: walkBudget(q.limit, gardens.length),
    tag: q.tag,
    limit: q.limit,
  };
}

/**
 * The batched statement and its values for these walks: searchWalks when none has a tag,
 * searchWalksTag when every one has one (the caller never mixes them).
 */
export function walksCall(walks: readonly WalkArgs[]): ['searchWalks' | 'searchWalksTag', unknown[]] {
  if (walks.some((w) => w.afters !== undefined)) throw new Error('walksCall: a later round walks alone');
  const slots = Array.from({ length: WALK_MAX_GARDENS }, (_, i) => walks.map((w) => w.gardens[i] ?? null));
  const values = [
    ...slots,
    walks.map((w) => w.tsquery),
    walks.map((w) => w.afterId),
    walks.map((w) => w.budget),
    walks.map((w) => w.limit),
  ];
  const tagged = walks[0]?.tag != null;
  if (walks.some((w) => (w.tag !== null) !== tagged))
    throw new Error('walksCall: tagged and untagged walks mixed');
  return tagged ? ['searchWalksTag', [...values, walks.map((w) => w.tag)]] : ['searchWalks', values];
}

export interface WalkRow extends PagePlant {
  hit: boolean;
  cut: boolean;
}

/** Walks after the first that a search page may take before the planned statement finishes it. */
const MORE_ROUNDS = 2;

/**
 * A search page read by walks (search.ts: the walk), round by round. Each round's rows say, for
 * each garden it walked, how far its matches are known: to its marker (`cut`), or, when the round's
 * answer was cut at `limit` rows, to the last of them, or to the garden's end. The page is whole
 * once `limit` matches lie at or below every unfinished garden's known end (or no garden is
 * unfinished). Otherwise a later round walks, each from its own end, only the gardens whose known
 * end lies below the page's `limit`-th match known so far (all unfinished ones while fewer are
 * known): so a page whose matches sit in one garden's run of plants (a store filled one user's
 * import at a time) walks on in that garden instead of giving up at its first marker. Rounds stop
 * after MORE_ROUNDS more, or when the rounds so far found fewer than a quarter page of matches (a
 * rare term: the planned statement, along the word index, is the better read); then `rest` says
 * where the planned statement reads on from. Each garden's walk starts strictly after its known
 * end, so no plant is counted twice, whatever snapshot each round read.
 */
export class SearchWalk {
  private readonly known = new Map<string, { end: number; done: boolean }>();
  private matches: PagePlant[] = [];
  private rounds = 0;

  constructor(private readonly first: WalkArgs) {
    for (const g of first.gardens) this.known.set(g, { end: first.afterId, done: false });
  }

  private get limit(): number {
    return this.first.limit;
  }

  /** Takes one round's rows, for the gardens that round walked. */
  take(walked: readonly string[], rows: readonly WalkRow[]): void {
    this.rounds++;
    const cutAt = rows.length === this.limit ? rows[rows.length - 1]!.id : null;
    const cuts = new Map<string, number>();
    for (const r of rows) {
      if (r.hit) {
        this.matches.push({ id: r.id, garden: r.garden, name: r.name, tag: r.tag, version: r.version });
      }
      if (r.cut) cuts.set(r.garden, r.id);
    }
    for (const g of walked) {
      const k = this.known.get(g)!;
      const end = cuts.get(g) ?? cutAt;
      if (end === null) k.done = true;
      // An answer cut at `limit` rows below where this garden's walk started says nothing new of
      // it: its known end stays (lowered, a later walk would read its known matches again).
      else k.end = Math.max(k.end, end);
    }
    this.matches.sort((a, b) => a.id - b.id);
  }

  /** How far every garden's matches are known: the least end of an unfinished garden. */
  private bound(): number {
    let b = Number.POSITIVE_INFINITY;
    for (const k of this.known.values()) if (!k.done && k.end < b) b = k.end;
    return b;
  }

  /** The page, when the rounds so far make it whole. */
  page(): PagePlant[] | null {
    const bound = this.bound();
    const sure = this.matches.filter((m) => m.id <= bound);
    if (sure.length >= this.limit || bound === Number.POSITIVE_INFINITY) return sure.slice(0, this.limit);
    return null;
  }

  /** The next round's walk, or null when the planned statement is to finish the page. */
  next(): WalkArgs | null {
    if (this.rounds > MORE_ROUNDS || this.matches.length < Math.ceil(this.limit / 4)) return null;
    const last = this.matches.length >= this.limit ? this.matches[this.limit - 1]!.id : null;
    const gardens = [...this.known].filter(([, k]) => !k.done && (last === null || k.end < last));
    if (gardens.length === 0) return null;
    return {
      ...this.first,
      gardens: gardens.map(([g]) => g),
      afters: gardens.map(([, k]) => k.end),
      budget: walkBudget(this.limit, gardens.length),
    };
  }

  /** What the planned statement finishes: the matches known for sure, and the id it reads on from. */
  rest(): { page: PagePlant[]; from: number } {
    const bound = this.bound();
    return { page: this.matches.filter((m) => m.id <= bound), from: bound };
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
