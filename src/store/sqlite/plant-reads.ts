import type Database from 'better-sqlite3';
import { roleOf } from '../../access/policy.js';
import { nameMatches } from '../../search-text.js';
import { type GardenRead, mergeGardens } from '../garden-merge.js';
import type { ListMarks, PagePlant, PageQuery, Role, VersionedPlant } from '../store.js';
import type { GardenIdLists } from './garden-ids.js';
import type { LocalMarks } from './local-marks.js';
import { matchQuery, termQuery, type WordsFrom } from './search.js';

/**
 * Runs `fn` in a read transaction (`begin`, then `commit`) of its own on `db`, unless the
 * connection already holds one (the read batch's): one snapshot for every statement `fn` runs.
 */
export function inReadTransaction<T>(
  db: Database.Database,
  begin: Database.Statement,
  commit: Database.Statement,
  fn: () => T,
): T {
  if (db.inTransaction) return fn();
  begin.run();
  try {
    return fn();
  } finally {
    if (db.inTransaction) commit.run();
  }
}

/** Fewest rows a search with a wide term reads along that term's first 3 letters (search). */
const WALK = 100;

// A page's row: id, garden, name, tag (and version, when asked).
type Row = [number, string, string, string | null];
type VersionedPageRow = [number, string, string, string | null, number];
// A garden's page: id, name, tag (and version), the garden being the one asked for.
type GardenPageRow = [number, string, string | null];
type VersionedGardenPageRow = [number, string, string | null, number];
// One plant: id, owner, garden, name, tag, version.
type VersionedRow = [number, string, string, string, string | null, number];
const toPlant = (r: VersionedRow): VersionedPlant => ({
  id: r[0],
  owner: r[1],
  garden: r[2],
  name: r[3],
  tag: r[4],
  version: r[5],
});
/**
 * The same mapping for the rows of a list page, written out a second time on purpose. V8 decides
 * per object literal in the source whether the objects it makes go straight to the old generation
 * (allocation-site pretenuring), and a page's records all outlive the young-generation GCs that
 * run while it is built, so V8 pretenures the literal that makes them. Shared with the one-plant
 * read, every read's record then became old-generation garbage: a major GC every ~1.2 s and read
 * one's p99 at 6-10 ms instead of ~2 ms (docs/benchmarks.md).
 */
const toPagePlant = (r: Row): PagePlant => ({ id: r[0], garden: r[1], name: r[2], tag: r[3] });
/** A garden's page rows (id, name, tag[, version]) as records of that garden; the same shapes as above. */
const gardenPage = (garden: string, rows: GardenPageRow[]): PagePlant[] =>
  rows.map((r) => ({ id: r[0], garden, name: r[1], tag: r[2] }));
const versionedGardenPage = (garden: string, rows: VersionedGardenPageRow[]): PagePlant[] =>
  rows.map((r) => ({ id: r[0], garden, name: r[1], tag: r[2], version: r[3] }));
const toVersionedPagePlant = (r: VersionedPageRow): PagePlant => ({
  id: r[0],
  garden: r[1],
  name: r[2],
  tag: r[3],
  version: r[4],
});

/**
 * The plant reads of SQLite: one plant, and list pages (one garden's along its index, several
 * gardens' from their ids kept in memory, a walk in id order, or their reads merged). Each runs in
 * the store's read batch (store.ts), which holds one snapshot for all the reads of a turn.
 */
export class SqlitePlantReads {
  private stmts: ReturnType<SqlitePlantReads['prepare']> | undefined;
  /** Rows the search statements have read from the FTS5 index: each a candidate for a page. */
  searchRows = 0;

  constructor(
    private readonly db: Database.Database,
    private readonly idLists: GardenIdLists,
    private readonly marks: LocalMarks,
    /** The list marks as of the read batch's snapshot. */
    private readonly marksNow: (gardens: readonly string[] | null, tag: string | null) => ListMarks,
  ) {}

  // Prepared on first use: the tables exist only once migrate() has run.
  private get s() {
    this.stmts ??= this.prepare();
    return this.stmts;
  }

  private prepare() {
    const db = this.db;
    return {
      // Rows come back as arrays: far cheaper for the driver to build than objects.
      getPlant: db
        .prepare<[number], VersionedRow>(
          'SELECT id, owner, garden, name, tag, version FROM plants WHERE id = ?',
        )
        .raw(),
      // The plant and the reader's role in its garden: two primary-key lookups in one statement,
      // the same work whether the plant is missing, someone else's, or the reader's. A scalar
      // subquery, not a LEFT JOIN: the same two lookups, but a step of the join cost 25-40 µs
      // against 7 µs (better-sqlite3 12.x, SQLite 3.54, 100,000 plants on a tmpfs).
      plantFor: db
        .prepare<[string, number], [...VersionedRow, Role | null]>(
          `SELECT p.id, p.owner, p.garden, p.name, p.tag, p.version,
             (SELECT m.role FROM garden_members m WHERE m.garden_id = p.garden AND m.user_id = ?)
           FROM plants p WHERE p.id = ?`,
        )
        .raw(),
      // The page paths read only their index (plants_garden_page, plants_garden_tag_page,
      // plants_tag_page), each carrying the columns a page shows.
      listAll: db
        .prepare<[number, number], Row>(
          'SELECT id, garden, name, tag FROM plants WHERE id > ? ORDER BY id LIMIT ?',
        )
        .raw(),
      listAllTag: db
        .prepare<[string, number, number], Row>(
          'SELECT id, garden, name, tag FROM plants WHERE tag = ? AND id > ? ORDER BY id LIMIT ?',
        )
        .raw(),
      // A garden's page leaves out the garden: the caller named it, and each row's copy was a
      // string made for nothing (3-4 µs of a 21-row page's 27, measured on the statement alone).
      listGarden: db
        .prepare<[string, number, number], GardenPageRow>(
          'SELECT id, name, tag FROM plants WHERE garden = ? AND id > ? ORDER BY id LIMIT ?',
        )
        .raw(),
      listGardenTag: db
        .prepare<[string, string, number, number], GardenPageRow>(
          'SELECT id, name, tag FROM plants WHERE garden = ? AND tag = ? AND id > ? ORDER BY id LIMIT ?',
        )
        .raw(),
      // The same pages with each plant's version (include=version): not in the list indexes, so
      // each row is looked up in the table; only lists that ask for versions pay for it.
      listAllV: db
        .prepare<[number, number], VersionedPageRow>(
          'SELECT id, garden, name, tag, version FROM plants WHERE id > ? ORDER BY id LIMIT ?',
        )
        .raw(),
      listAllTagV: db
        .prepare<[string, number, number], VersionedPageRow>(
          'SELECT id, garden, name, tag, version FROM plants WHERE tag = ? AND id > ? ORDER BY id LIMIT ?',
        )
        .raw(),
      listGardenV: db
        .prepare<[string, number, number], VersionedGardenPageRow>(
          'SELECT id, name, tag, version FROM plants WHERE garden = ? AND id > ? ORDER BY id LIMIT ?',
        )
        .raw(),
      listGardenTagV: db
        .prepare<[string, string, number, number], VersionedGardenPageRow>(
          'SELECT id, name, tag, version FROM plants WHERE garden = ? AND tag = ? AND id > ? ORDER BY id LIMIT ?',
        )
        .raw(),
      // A garden's plant ids after one, along its page index (GardenIdLists), and a page's rows by id.
      gardenIds: db
        .prepare<[string, number, number], number>(
          'SELECT id FROM plants WHERE garden = ? AND id > ? ORDER BY id LIMIT ?',
        )
        .pluck(),
      gardenTagIds: db
        .prepare<[string, string, number, number], number>(
          'SELECT id FROM plants WHERE garden = ? AND tag = ? AND id > ? ORDER BY id LIMIT ?',
        )
        .pluck(),
      byIds: db
        .prepare<[string], Row>(
          'SELECT id, garden, name, tag FROM plants WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id',
        )
        .raw(),
      byIdsV: db
        .prepare<[string], VersionedPageRow>(
          'SELECT id, garden, name, tag, version FROM plants WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id',
        )
        .raw(),
      // The next `window` plants in id order (with the tag: along its index), the gardens' ones kept.
      window: db
        .prepare<[number, number, string, number], Row>(
          `SELECT id, garden, name, tag FROM (SELECT id, garden, name, tag FROM plants WHERE id > ? ORDER BY id LIMIT ?)
           WHERE garden IN (SELECT value FROM json_each(?)) ORDER BY id LIMIT ?`,
        )
        .raw(),
      windowTag: db
        .prepare<[string, number, number, string, number], Row>(
          `SELECT id, garden, name, tag FROM (SELECT id, garden, name, tag FROM plants INDEXED BY plants_tag_page
             WHERE tag = ? AND id > ? ORDER BY id LIMIT ?)
           WHERE garden IN (SELECT value FROM json_each(?)) ORDER BY id LIMIT ?`,
        )
        .raw(),
      windowV: db
        .prepare<[number, number, string, number], VersionedPageRow>(
          `SELECT id, garden, name, tag, version FROM (SELECT id, garden, name, tag, version FROM plants
             WHERE id > ? ORDER BY id LIMIT ?)
           WHERE garden IN (SELECT value FROM json_each(?)) ORDER BY id LIMIT ?`,
        )
        .raw(),
      windowTagV: db
        .prepare<[string, number, number, string, number], VersionedPageRow>(
          `SELECT id, garden, name, tag, version FROM (SELECT id, garden, name, tag, version FROM plants
             INDEXED BY plants_tag_page WHERE tag = ? AND id > ? ORDER BY id LIMIT ?)
           WHERE garden IN (SELECT value FROM json_each(?)) ORDER BY id LIMIT ?`,
        )
        .raw(),
      // How far such a walk went: how many plants, and the last id.
      windowEnd: db
        .prepare<[number, number], [number, number | null]>(
          'SELECT count(*), max(id) FROM (SELECT id FROM plants WHERE id > ? ORDER BY id LIMIT ?)',
        )
        .raw(),
      windowEndTag: db
        .prepare<[string, number, number], [number, number | null]>(
          `SELECT count(*), max(id) FROM (SELECT id FROM plants INDEXED BY plants_tag_page
             WHERE tag = ? AND id > ? ORDER BY id LIMIT ?)`,
        )
        .raw(),
      // Search (search.ts): the plants whose words match, in rowid (= id) order along the FTS5
      // index, each row then read by its primary key. The tag filters the rows found.
      search: db
        .prepare<[string, number, number], Row>(
          `SELECT p.id, p.garden, p.name, p.tag FROM plant_search JOIN plants p ON p.id = plant_search.rowid
           WHERE plant_search MATCH ? AND plant_search.rowid > ? ORDER BY plant_search.rowid LIMIT ?`,
        )
        .raw(),
      searchTag: db
        .prepare<[string, number, string, number], Row>(
          `SELECT p.id, p.garden, p.name, p.tag FROM plant_search JOIN plants p ON p.id = plant_search.rowid
           WHERE plant_search MATCH ? AND plant_search.rowid > ? AND p.tag = ? ORDER BY plant_search.rowid LIMIT ?`,
        )
        .raw(),
      searchV: db
        .prepare<[string, number, number], VersionedPageRow>(
          `SELECT p.id, p.garden, p.name, p.tag, p.version FROM plant_search JOIN plants p ON p.id = plant_search.rowid
           WHERE plant_search MATCH ? AND plant_search.rowid > ? ORDER BY plant_search.rowid LIMIT ?`,
        )
        .raw(),
      searchTagV: db
        .prepare<[string, number, string, number], VersionedPageRow>(
          `SELECT p.id, p.garden, p.name, p.tag, p.version FROM plant_search JOIN plants p ON p.id = plant_search.rowid
           WHERE plant_search MATCH ? AND plant_search.rowid > ? AND p.tag = ? ORDER BY plant_search.rowid LIMIT ?`,
        )
        .raw(),
      // The words of the index a term begins (search.ts termQuery), in order.
      wordsFrom: db
        .prepare<[string, string, number], string>(
          'SELECT word FROM plant_search_words WHERE word >= ? AND word < ? ORDER BY word LIMIT ?',
        )
        .pluck(),
      beginRead: db.prepare('BEGIN'),
      commit: db.prepare('COMMIT'),
    };
  }

  /** The plant with this id, whoever's garden it is in. */
  get(id: number): VersionedPlant | null {
    const row = this.s.getPlant.get(id) as VersionedRow | undefined;
    return row === undefined ? null : toPlant(row);
  }

  /** The plant and the role `user` has in its garden (null: admin); null when missing or no member. */
  plantFor(id: number, user: string | null): { plant: VersionedPlant; role: Role } | null {
    // An administrator's read needs no membership (roleOf: an owner everywhere).
    const row = (user === null ? this.s.getPlant.get(id) : this.s.plantFor.get(user, id)) as
      | [...VersionedRow, (Role | null)?]
      | undefined;
    if (row === undefined) return null;
    const role = roleOf(user, row[6]);
    return role === null ? null : { plant: toPlant(row as unknown as VersionedRow), role };
  }

  /** A page of plants (see Store.listPlants). */
  list(q: PageQuery): PagePlant[] {
    const gardens = q.gardens;
    if (q.terms !== undefined) return this.search(q, q.terms);
    if (gardens === null) {
      if (q.withVersion) {
        const rows =
          q.tag === null
            ? this.s.listAllV.all(q.afterId, q.limit)
            : this.s.listAllTagV.all(q.tag, q.afterId, q.limit);
        return rows.map(toVersionedPagePlant);
      }
      const rows =
        q.tag === null
          ? this.s.listAll.all(q.afterId, q.limit)
          : this.s.listAllTag.all(q.tag, q.afterId, q.limit);
      return (rows as Row[]).map(toPagePlant);
    }
    if (gardens.length === 0) return [];
    const tag = q.tag;
    const read = q.withVersion
      ? (g: string, after: number, n: number) =>
          versionedGardenPage(
            g,
            tag === null ? this.s.listGardenV.all(g, after, n) : this.s.listGardenTagV.all(g, tag, after, n),
          )
      : (g: string, after: number, n: number) =>
          gardenPage(
            g,
            (tag === null
              ? this.s.listGarden.all(g, after, n)
              : this.s.listGardenTag.all(g, tag, after, n)) as GardenPageRow[],
          );
    if (gardens.length === 1) return read(gardens[0]!, q.afterId, q.limit);
    // Several reads make one page: they share one snapshot.
    return this.snapshot(() => this.fromIdList(gardens, q) ?? this.acrossGardens(gardens, q, read));
  }

  // A page of search's matches along the FTS5 index, whatever the gardens. Every term is asked of
  // FTS5 by what it reads a row at a time: a prefix of up to 3 characters along its prefix index,
  // a longer term by the words it begins, looked up first in plant_search_words (search.ts). So
  // every row read is a match, and the work follows the caller's matches, never the store's size
  // nor the rows that share a term's first letters. The words and the rows are read in one snapshot.
  // A term more than 64 words begin with (search.ts termQuery) is first read along its first 3
  // letters, at most WALK rows (or 4 pages) checked one by one: where its matches are dense, that
  // fills the page at once. Then, from where that stopped, by FTS5's prefix of the whole term,
  // which merges that term's matches in the whole store before the first (13 ms for 50,000).
  private search(q: PageQuery, terms: string[]): PagePlant[] {
    if (q.gardens?.length === 0) return [];
    return this.snapshot(() => {
      const wordsFrom: WordsFrom = (from, to, n) => this.s.wordsFrom.all(from, to, n);
      const asked: NonNullable<ReturnType<typeof termQuery>>[] = [];
      for (const t of terms) {
        const one = termQuery(t, wordsFrom);
        // No word begins with it: nothing matches.
        if (one === null) return [];
        asked.push(one);
      }
      const exact = matchQuery(
        q.gardens,
        asked.map((a) => a.exact),
      );
      if (asked.every((a) => a.first3 === undefined)) return this.searchRead(q, exact, q.afterId, q.limit);
      const walk = Math.max(WALK, 4 * q.limit);
      const first3 = matchQuery(
        q.gardens,
        asked.map((a) => a.first3 ?? a.exact),
      );
      const page: PagePlant[] = [];
      let after = q.afterId;
      // Twice the page's rows first, then four times more each round (as few as fill a page).
      for (let read = 0, n = 2 * q.limit; read < walk; n *= 4) {
        const size = Math.min(n, walk - read);
        const rows = this.searchRead(q, first3, after, size);
        read += size;
        for (const p of rows) {
          if (!nameMatches(p.name, terms)) continue;
          page.push(p);
          if (page.length === q.limit) return page;
        }
        // The walk reached the last match of the first 3 letters: the page is all there is.
        if (rows.length < size) return page;
        after = rows[rows.length - 1]!.id;
      }
      return page.concat(this.searchRead(q, exact, after, q.limit - page.length));
    });
  }

  /** Up to `n` plants after `after` that FTS5's `match` finds, in id order. */
  private searchRead(q: PageQuery, match: string, after: number, n: number): PagePlant[] {
    const s = this.s;
    if (q.withVersion) {
      const rows = q.tag === null ? s.searchV.all(match, after, n) : s.searchTagV.all(match, after, q.tag, n);
      this.searchRows += rows.length;
      return rows.map(toVersionedPagePlant);
    }
    const rows = q.tag === null ? s.search.all(match, after, n) : s.searchTag.all(match, after, q.tag, n);
    this.searchRows += rows.length;
    return (rows as Row[]).map(toPagePlant);
  }

  /**
   * A page across several gardens. First one statement walks the next plants in id order (along
   * the tag's index with a tag), at most WINDOW of them, keeping the gardens' ones: where the
   * caller's plants are not rare, that fills the page at about the cost of one garden's read, which
   * twenty index reads merged are not (docs/benchmarks.md). Where it does not fill the page, the
   * rest comes from the per-garden reads merged (mergeGardens), from the end of the walk on. Either
   * way the rows read are bounded by the page and the gardens, never by how many plants there are.
   */
  private acrossGardens(gardens: readonly string[], q: PageQuery, read: GardenRead<PagePlant>): PagePlant[] {
    const window = Math.min(4096, Math.max(256, 16 * q.limit));
    const set = this.gardenSet(gardens);
    const s = this.s;
    const rows: PagePlant[] =
      q.tag === null
        ? q.withVersion
          ? s.windowV.all(q.afterId, window, set, q.limit).map(toVersionedPagePlant)
          : (s.window.all(q.afterId, window, set, q.limit) as Row[]).map(toPagePlant)
        : q.withVersion
          ? s.windowTagV.all(q.tag, q.afterId, window, set, q.limit).map(toVersionedPagePlant)
          : (s.windowTag.all(q.tag, q.afterId, window, set, q.limit) as Row[]).map(toPagePlant);
    if (rows.length === q.limit) return rows;
    const [walked, end] = (
      q.tag === null ? s.windowEnd.get(q.afterId, window) : s.windowEndTag.get(q.tag, q.afterId, window)
    ) as [number, number | null];
    // The walk reached the last plant: the page is all there is.
    if (walked < window || end === null) return rows;
    return rows.concat(mergeGardens(gardens, end, q.limit - rows.length, read));
  }

  /**
   * A page across several gardens from their ids kept in memory (GardenIdLists): one read of the
   * page's rows by id. Undefined when the gardens hold too many plants to keep their ids.
   */
  private fromIdList(gardens: readonly string[], q: PageQuery): PagePlant[] | undefined {
    const set = this.gardenSet(gardens);
    const key = q.tag === null ? set : `${set}\0${q.tag}`;
    const tag = q.tag;
    const s = this.s;
    const ids = this.idLists.page(key, this.marksNow(gardens, tag), q.afterId, q.limit, (after, cap) => {
      const all: number[] = [];
      for (const g of new Set(gardens)) {
        // Adding to a kept list (only creates after every other since): only gardens that had one.
        if (after > 0 && this.marks.topOf(g, tag) <= after) continue;
        const some = tag === null ? s.gardenIds.all(g, after, cap) : s.gardenTagIds.all(g, tag, after, cap);
        for (const id of some) all.push(id);
        if (all.length >= cap) break;
      }
      return all.sort((a, b) => a - b);
    });
    if (ids === undefined) return undefined;
    if (ids.length === 0) return [];
    const list = JSON.stringify(ids);
    return q.withVersion
      ? s.byIdsV.all(list).map(toVersionedPagePlant)
      : (s.byIds.all(list) as Row[]).map(toPagePlant);
  }

  /** The plants among `ids` that exist, with versions, in id order (ChangePort.plantsByIds). */
  byIds(ids: number[]): PagePlant[] {
    return ids.length === 0 ? [] : this.s.byIdsV.all(JSON.stringify(ids)).map(toVersionedPagePlant);
  }

  // The gardens as the JSON array the window statements take; the same array is encoded once.
  private readonly gardenSets = new WeakMap<readonly string[], string>();
  private gardenSet(gardens: readonly string[]): string {
    let set = this.gardenSets.get(gardens);
    if (set === undefined) {
      set = JSON.stringify(gardens);
      this.gardenSets.set(gardens, set);
    }
    return set;
  }

  // Runs `fn` in a read transaction of its own, unless the read batch already holds one.
  private snapshot<T>(fn: () => T): T {
    return inReadTransaction(this.db, this.s.beginRead, this.s.commit, fn);
  }
}
