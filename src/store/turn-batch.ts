/** One queued operation and the promise it settles. */
export interface Pending {
  fn: () => unknown;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/**
 * Collects the operations queued during one turn of the event loop and hands them to `drain`
 * together, in a `setImmediate` after the turn's I/O callbacks (every request that arrived in the
 * turn has queued its operation by then). The SQLite store batches its writes (one transaction,
 * one fsync) and its reads (one read transaction) this way.
 */
export class TurnBatch {
  private items: Pending[] = [];
  private scheduled = false;

  constructor(private readonly drain: (batch: Pending[]) => void) {}

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
    this.scheduled = false;
    if (this.items.length === 0) return;
    const batch = this.items;
    this.items = [];
    this.drain(batch);
  }
}
