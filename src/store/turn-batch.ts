/** One queued operation and the promise it settles. */
export interface Pending {
  fn: () => unknown;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** How a TurnBatch drains what its batch's callers queue next (reads that follow a read). */
export interface FollowUps {
  /** At most this many more batches in the same turn, after the turn's first one. */
  batches: number;
  /** Microtasks to wait, with nothing queued, before the turn's draining ends. */
  hops: number;
}

/**
 * Collects the operations queued during one turn of the event loop and hands them to `drain`
 * together, in a `setImmediate` after the turn's I/O callbacks (every request that arrived in the
 * turn has queued its operation by then). The SQLite store batches its writes (one transaction,
 * one fsync) and its reads (one read transaction) this way.
 *
 * With `followUps`, what the batch's callers queue as soon as their promises settle (a request's
 * next read: a list reads the caller's gardens, then the list marks, then the page) is drained in
 * the same turn, as another batch, instead of waiting for the next turn of the event loop — which,
 * under load, means waiting for every request that arrived meanwhile to be parsed and started.
 * The callers' continuations run as microtasks; the batch waits `hops` microtasks with nothing
 * queued before it lets the turn go on, and drains at most `batches` more times (so a caller that
 * reads in a loop still yields to I/O every few batches).
 */
export class TurnBatch {
  private items: Pending[] = [];
  private scheduled = false;

  constructor(
    private readonly drain: (batch: Pending[]) => void,
    private readonly followUps?: FollowUps,
  ) {}

  push<T>(fn: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.items.push({ fn, resolve: resolve as (value: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.drainNow());
      }
    });
  }

  /** Drains what is queued now (also used before closing, so nothing queued is left hanging). */
  drainNow(): void {
    if (this.items.length === 0) {
      this.scheduled = false;
      return;
    }
    const batch = this.items;
    this.items = [];
    if (this.followUps === undefined) {
      this.scheduled = false;
      this.drain(batch);
      return;
    }
    // `scheduled` stays set while follow-ups are awaited: what is queued meanwhile is theirs.
    try {
      this.drain(batch);
    } finally {
      this.follow(this.followUps.batches, 0);
    }
  }

  private follow(batches: number, idle: number): void {
    queueMicrotask(() => {
      if (this.items.length > 0 && batches > 0) {
        const batch = this.items;
        this.items = [];
        try {
          this.drain(batch);
        } finally {
          this.follow(batches - 1, 0);
        }
        return;
      }
      if (this.items.length === 0 && idle + 1 < this.followUps!.hops) {
        this.follow(batches, idle + 1);
        return;
      }
      // Done for this turn; anything still queued (the follow-ups spent) goes to the next one.
      this.scheduled = false;
      if (this.items.length > 0) {
        this.scheduled = true;
        setImmediate(() => this.drainNow());
      }
    });
  }
}
