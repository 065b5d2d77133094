import type { ListMarks } from '../store.js';

interface Kept {
  marks: ListMarks;
  /** The plants' ids in order; null: too many to keep (asked again once the marks move). */
  ids: number[] | null;
}

/**
 * The ids of the plants of a set of gardens (with a tag, or any), in order, kept in memory while
 * the list marks (LocalMarks) say they are exact: a page across twenty gardens is then a binary
 * search and one read of the page's rows by id, where reading the gardens' indexes costs a seek per
 * garden and walking the table reads every plant in between (docs/benchmarks.md). When only `top`
 * moved (a plant created after every other), the ids after the last one kept are read and added;
 * when `reorder` moved (a delete, a change, a create below the newest, another writer), the list
 * is read again. Sets with more plants than `perList` are not kept, and all lists together hold at
 * most `maxIds` ids (the oldest go first).
 */
export class GardenIdLists {
  private readonly lists = new Map<string, Kept>();
  private held = 0;

  constructor(
    private readonly perList = 100_000,
    private readonly maxIds = 2_000_000,
  ) {}

  /**
   * The ids of the page after `afterId` for the set `key`, or undefined when the set has too many
   * plants to keep. `readIds(after, cap)` reads the set's ids after `after`, in order, at most `cap`.
   */
  page(
    key: string,
    marks: ListMarks,
    afterId: number,
    limit: number,
    readIds: (after: number, cap: number) => number[],
  ): number[] | undefined {
    let kept = this.lists.get(key);
    if (kept !== undefined && kept.marks.reorder !== marks.reorder) {
      this.drop(key, kept);
      kept = undefined;
    }
    if (this.perList === 0) return undefined;
    if (kept === undefined) {
      const ids = readIds(0, this.perList + 1);
      kept = { marks, ids: ids.length > this.perList ? null : ids };
      this.keep(key, kept);
    } else if (kept.marks.top !== marks.top && kept.ids !== null) {
      // Only plants created after every other since: they follow the last id kept.
      const more = readIds(kept.ids[kept.ids.length - 1] ?? 0, this.perList + 1 - kept.ids.length);
      this.drop(key, kept);
      const ids = kept.ids.concat(more);
      kept = { marks, ids: ids.length > this.perList ? null : ids };
      this.keep(key, kept);
    }
    if (kept.ids === null) return undefined;
    const ids = kept.ids;
    // The first id after afterId.
    let lo = 0;
    let hi = ids.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (ids[mid]! <= afterId) lo = mid + 1;
      else hi = mid;
    }
    return ids.slice(lo, lo + limit);
  }

  private keep(key: string, kept: Kept): void {
    this.lists.set(key, kept);
    this.held += kept.ids?.length ?? 0;
    for (const [k, v] of this.lists) {
      if (this.held <= this.maxIds) break;
      this.drop(k, v);
    }
  }

  private drop(key: string, kept: Kept): void {
    this.lists.delete(key);
    this.held -= kept.ids?.length ?? 0;
  }
}
