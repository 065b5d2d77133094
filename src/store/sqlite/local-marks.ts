import type { ListMarks } from '../store.js';

/** The database's write clock as a reader sees it (migration 5, `write_clock`). */
export interface WriteClock {
  /** Commits that changed plants, by any writer. */
  n: number;
  /** The writer of the last of them. */
  writer: string;
  /** The first commit of that writer's current run: commit `runStart - 1` was someone else's. */
  runStart: number;
  /** Plant rows changed by anything but a plantstore writer (sqlite3 by hand, say). */
  raw: number;
}

// Past this many scopes and tags kept, everything is forgotten at once (every page then misses once).
const MAX_ENTRIES = 200_000;

/**
 * List marks (ListMarks) kept in memory by the store whose writer makes the writes. The writer
 * tells it each plant it created or deleted before the write is acknowledged; the write clock,
 * read in a read transaction, tells it whether anyone else (another process, another store on the
 * same file, a hand-made edit) changed plants since it last looked — then every page may have
 * changed, and every mark moves at once. Unlike the triggers of migration 4 that this replaces, it
 * costs a create no rows of its own: the writer moves one clock row per commit.
 */
// The scope of the list of every garden's plants (no garden id is this).
const ALL = '\u0000';

export class LocalMarks {
  // reorder values come from one counter, so that forgetting everything (floor = ++counter) moves
  // every scope's reorder past any value a kept page holds. Kept per garden (ALL keys the list of
  // every garden's plants) and, for top, per tag ('' keys "any tag"; a tag is never empty): a list
  // across twenty gardens looks up forty keys per request, so none of them is a string built for it.
  private counter = 0;
  private floor = 0;
  private readonly reorder = new Map<string, number>();
  private readonly top = new Map<string, Map<string, number>>();
  private entries = 0;
  /** The clock as far as it was accounted for; undefined before the first look. */
  private known: WriteClock | undefined;

  constructor(private readonly me: string) {}

  /** Looks at the clock: a change by anyone but this store's writer since the last look moves every mark. */
  observe(clock: WriteClock): void {
    const known = this.known;
    this.known = clock;
    // Nothing cached can predate the first look, so it only sets the baseline.
    if (known === undefined) return;
    // Since `known`, only this writer if it wrote last and its run began at or before known.n + 1.
    const ours = clock.n === known.n || (clock.writer === this.me && clock.runStart - 1 <= known.n);
    if (clock.raw !== known.raw || !ours) this.forget();
  }

  /** A plant this store's writer created in `garden`: a server-assigned id lands after every other. */
  created(garden: string, tag: string | null, id: number, serverAssigned: boolean): void {
    for (const scope of [garden, ALL]) {
      this.raise(scope, '', id);
      if (tag !== null) this.raise(scope, tag, id);
      if (!serverAssigned) this.moved(scope);
    }
    this.bound();
  }

  /** A plant in `garden` this store's writer deleted or changed (a change may move it between tags). */
  deleted(garden: string): void {
    this.moved(garden);
    this.moved(ALL);
    this.bound();
  }

  /**
   * The marks of the list of `gardens`' plants (null: everyone's) with `tag`. Across several
   * gardens, each mark is the largest of theirs: every reorder value comes from one counter, so any
   * garden's reorder moving moves the largest; and a server-assigned id is above every id in the
   * store, so any garden's top rising moves the largest top too.
   */
  get(gardens: readonly string[] | null, tag: string | null): ListMarks {
    const t = tag ?? '';
    if (gardens === null)
      return { reorder: this.reorder.get(ALL) ?? this.floor, top: this.top.get(ALL)?.get(t) ?? 0 };
    let reorder = this.floor;
    let top = 0;
    for (const g of gardens) {
      const r = this.reorder.get(g);
      if (r !== undefined && r > reorder) reorder = r;
      const x = this.top.get(g)?.get(t);
      if (x !== undefined && x > top) top = x;
    }
    return { reorder, top };
  }

  /**
   * The largest id this store's writer created in `garden` (with `tag`, or any) since the marks were
   * last forgotten: a garden whose top is at or below an id has had no plant created after it since.
   */
  topOf(garden: string, tag: string | null): number {
    return this.top.get(garden)?.get(tag ?? '') ?? 0;
  }

  private moved(scope: string): void {
    if (!this.reorder.has(scope)) this.entries++;
    this.reorder.set(scope, ++this.counter);
  }

  private raise(scope: string, tag: string, id: number): void {
    let tops = this.top.get(scope);
    if (tops === undefined) {
      tops = new Map();
      this.top.set(scope, tops);
    }
    const was = tops.get(tag);
    if (was === undefined) this.entries++;
    if ((was ?? 0) < id) tops.set(tag, id);
  }

  private forget(): void {
    this.reorder.clear();
    this.top.clear();
    this.entries = 0;
    this.floor = ++this.counter;
  }

  private bound(): void {
    if (this.entries > MAX_ENTRIES) this.forget();
  }
}
