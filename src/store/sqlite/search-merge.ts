// Keeping the search index (search.ts) in few segments. FTS5 writes each commit's words as a new
// segment and merges them only a few at a time (automerge), so a store written in many commits
// holds a dozen or more: a search looks each of its terms up in every one. On the benchmark's
// 1,000,000-plant store a query for `mon` in 3 gardens took 135 µs; merged into one segment,
// 47–50 µs (`cac`: 79 → 21 µs). Merging everything rewrites the whole index, so it is done only
// while plant writes are quiet, in steps of MERGE_STEP_PAGES pages (about 10 ms each on that
// store, about 55 steps in all), each its own write through the writer: a write arriving meanwhile
// waits for one step at most, and ends the run until the next quiet spell.

/** Pages one step writes at most (FTS5's 'merge' with -N: every segment, N pages at a time). */
export const MERGE_STEP_PAGES = 200;

/** The statement of one step, given -MERGE_STEP_PAGES. */
export const MERGE_STEP_SQL = "INSERT INTO plant_search (plant_search, rank) VALUES ('merge', ?)";

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
