// Keeping the search index (search.ts) in few segments. FTS5 writes each commit's words as a new
// segment and merges them only a few at a time (automerge: 4 segments of one level into one of the
// next), so a store written in many commits holds a dozen or more: a search looks each of its terms
// up in every one. On the benchmark's 1,000,000-plant store a query for `mon` in 3 gardens took
// 135 µs across its segments; merged into one segment, 47–50 µs (`cac`: 79 → 21 µs).
//
// Merging everything rewrites the whole index, so a full merge is started only when the segments
// besides the largest hold at least 1/MERGE_FRACTION of its pages (mergeWanted): the pages it
// rewrites are then at most MERGE_FRACTION + 1 times the pages written since the last one, whatever
// the store's size. Below that, the small segments merge among themselves, two of a level into one
// of the next (FTS5's 'merge' with a positive count and `usermerge` 2), never on the largest's
// level nor into it (smallMergeLevel), a page a statement so that each choice is looked at first:
// a few segments are left beside the largest. On a 1,000,000-plant store merged into one segment,
// 50 creates then leave 2 segments and 1,000 creates 3 (4 and 13 pages beside 12,251), and the
// merge's CPU is lost in the idle process's (18 ms over 3 s), where merging everything took
// 660–730 ms (on 10,000,000 plants after 50 creates: 18 ms against 6,436 ms); a search for `mon`
// in 3 gardens costs 74–80 µs after 50 and 108–113 µs after 1,000 (62–78 µs in one segment):
// `npx tsx bench/search-merge-cost.ts . 1000`, docs/benchmarks.md.
// These merges run only while plant writes are quiet, in steps of at most MERGE_STEP_PAGES pages (about
// 10 ms each on that store), each its own write through the writer: a write arriving meanwhile
// waits for one step at most, and ends the run until the next quiet spell, which resumes a full
// merge under way.

//
// While writes go on, the writer thread merges in paced steps instead of FTS5's automerge
// (writer-thread.ts). Automerge works inside the COMMIT that crosses its mark: every 64 leaf pages
// written, 64 pages for each level of the index at once, so one create in 64 commits of 2 plants
// waited 22-24 ms for it on a 100,000-plant index (against p99 0.38-0.47 ms:
// bench/search-commit-times.ts). With automerge off (a setting FTS5 keeps in the store), the writer
// merges PACED_STEP_PAGES pages after a commit has been answered, and again whenever it has nothing
// queued, while a level holds PACED_SEGMENTS segments or a merge is under way: the merges automerge
// makes (a level of 4 segments into one of the next, the largest's level too), in steps that a
// write arriving meanwhile waits for at most one of. A writer that is never idle still makes one
// step after each commit, and FTS5's crisismerge (16 segments on one level, merged in the commit)
// stays as the backstop. A step's commit does not wait for the disk (writes.ts, pacedMerge).

/** Pages one paced step writes at most (FTS5's 'merge' with a positive N, usermerge PACED_SEGMENTS). */
export const PACED_STEP_PAGES = 8;

/** Segments on one level that start a paced merge of that level (FTS5's own automerge default). */
export const PACED_SEGMENTS = 4;

/**
 * Sets FTS5's `automerge` (stored in the index's config table: for every connection, and kept).
 * FTS5 takes only an INTEGER there, and a JavaScript number is bound as a REAL.
 */
export const AUTOMERGE_SQL =
  "INSERT INTO plant_search (plant_search, rank) VALUES ('automerge', CAST(? AS INTEGER))";

/** FTS5's `automerge` as the store holds it (no row: FTS5's default, 4). */
export const AUTOMERGE_READ_SQL = "SELECT v FROM plant_search_config WHERE k = 'automerge'";

/** FTS5's default `automerge`: merge a level once it holds 4 segments, inside the commit. */
export const FTS5_AUTOMERGE = 4;

/** Whether a paced step is due: a merge is under way on some level, or a level holds PACED_SEGMENTS segments. */
export function pacedWanted(levels: SearchLevel[]): boolean {
  return levels.some(({ merging, pages }) => merging > 0 || pages.length >= PACED_SEGMENTS);
}

/** Pages one step writes at most (FTS5's 'merge' with -N: every segment, N pages at a time). */
export const MERGE_STEP_PAGES = 200;

/** The statement of one step: given -MERGE_STEP_PAGES, a full merge; given 1, a small merge (smallMergeLevel). */
export const MERGE_STEP_SQL = "INSERT INTO plant_search (plant_search, rank) VALUES ('merge', ?)";

/** FTS5's structure record: the index's segments, level by level (row 10 of its data table). */
export const STRUCTURE_SQL = 'SELECT block FROM plant_search_data WHERE id = 10';

/**
 * Sets FTS5's `usermerge`: a positive 'merge' merges a level once it holds this many segments
 * (2 for the quiet merges, PACED_SEGMENTS for the paced steps: a step whose level's merge ends
 * within its pages goes on with the next level holding that many, and with 2 the paced steps
 * merged nearly every pair, twice the levels automerge leaves and more CPU a create).
 */
export const USERMERGE_SQL =
  "INSERT INTO plant_search (plant_search, rank) VALUES ('usermerge', CAST(? AS INTEGER))";

/** A merge starts once the segments besides the largest hold 1/MERGE_FRACTION of its pages. */
export const MERGE_FRACTION = 8;

/** One level of the structure record: how many of its segments merge into the next level, and each segment's pages. */
export interface SearchLevel {
  merging: number;
  pages: number[];
}

/** Reads FTS5's structure record (fts5StructureDecode in sqlite3.c): its levels, oldest segment first. */
export function searchLevels(block: Uint8Array): SearchLevel[] {
  let i = 4; // the configuration cookie
  const v2 = block[4] === 0xff && block[5] === 0 && block[6] === 0 && block[7] === 1;
  if (v2) i += 4;
  // SQLite's varint: 7 bits a byte, high bit set on all but the last; a 9th byte gives all 8 bits.
  const varint = (): number => {
    let v = 0;
    for (let k = 0; k < 8; k++) {
      const b = block[i++]!;
      v = v * 128 + (b & 0x7f);
      if (b < 0x80) return v;
    }
    return v * 256 + block[i++]!;
  };
  const nLevel = varint();
  varint(); // segments in all
  varint(); // the write counter
  const levels: SearchLevel[] = [];
  for (let l = 0; l < nLevel; l++) {
    const merging = varint();
    const n = varint();
    const pages: number[] = [];
    for (let s = 0; s < n; s++) {
      varint(); // segment id
      const first = varint();
      const last = varint();
      if (v2) for (let k = 0; k < 5; k++) varint(); // origins, tombstone pages and entries, entries
      pages.push(last - first + 1);
    }
    levels.push({ merging, pages });
  }
  return levels;
}

/**
 * Whether a merge step is due: a merge of the largest segment is under way (an earlier quiet spell
 * began it, as input or as the segment it writes), or the other segments hold at least
 * 1/MERGE_FRACTION of its pages.
 */
export function mergeWanted(levels: SearchLevel[]): boolean {
  let largest = 0;
  let total = 0;
  let count = 0;
  let largestMerging = false;
  levels.forEach(({ merging, pages }, l) => {
    pages.forEach((p, s) => {
      total += p;
      count++;
      if (p > largest) {
        largest = p;
        // A merge under way reads a level's first `merging` segments into the last of the next level.
        largestMerging = s < merging || (s === pages.length - 1 && (levels[l - 1]?.merging ?? 0) > 0);
      }
    });
  });
  if (count < 2) return false;
  return largestMerging || (total - largest) * MERGE_FRACTION >= largest;
}

/**
 * The level FTS5's 'merge' with a positive N would merge next (fts5IndexMerge in sqlite3.c, with
 * `usermerge` 2: a level with a merge under way, else the lowest of those holding the most
 * segments, if 2 or more), or -1 if none, or if its output would land on the largest segment's
 * level: a level holding several segments is merged whole (by this or by FTS5's automerge), and
 * that one would rewrite the largest.
 */
export function smallMergeLevel(levels: SearchLevel[]): number {
  let largest = 0;
  let largestLevel = -1;
  levels.forEach(({ pages }, l) => {
    for (const p of pages)
      if (p > largest) {
        largest = p;
        largestLevel = l;
      }
  });
  let chosen = -1;
  let most = 0;
  for (const [l, { merging, pages }] of levels.entries()) {
    if (merging > 0) {
      chosen = l;
      most = 2;
      break;
    }
    if (pages.length > most) {
      most = pages.length;
      chosen = l;
    }
  }
  if (most < 2 || chosen + 1 >= largestLevel) return -1;
  return chosen;
}

/**
 * Runs merge steps once plant writes have been quiet for `quietMs`, until one says there is
 * nothing left to merge or a plant write arrives. `step` makes one step as a write and answers
 * whether it merged anything.
 */
export class SearchMerger {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private closed = false;
  /** Moves with each plant write: a run stops when it moved under it. */
  private writes = 0;

  constructor(
    private readonly step: () => Promise<boolean>,
    private readonly quietMs: number,
  ) {}

  /** A plant write committed (words changed): merging waits for quiet again. */
  wrote(): void {
    if (this.closed) return;
    this.writes++;
    this.arm();
  }

  private arm(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.run(), this.quietMs);
    this.timer.unref();
  }

  private async run(): Promise<void> {
    // A run still finishing its step: look again after another quiet spell.
    if (this.running) return this.arm();
    this.running = true;
    const at = this.writes;
    try {
      while (!this.closed && this.writes === at && (await this.step()));
    } catch {
      // A failed step (the store closing, a busy lock): the next quiet spell after a write tries again.
    } finally {
      this.running = false;
    }
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }
}
