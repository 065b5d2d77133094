import { type Pending, TurnBatch } from '../turn-batch.js';

/**
 * The calls of one kind queued in a turn (TurnBatch), answered by one call of `run`, which gives
 * an outcome per argument, in order (a promise for one settled on its own); when `run` fails,
 * every call of the batch fails with its error.
 *
 * At most `maxInFlight` runs are under way at once: calls queued while that many are out wait for
 * the first to finish and then go together in one run. Under load this makes the batches larger
 * rather than the statements more (each statement is a write to PostgreSQL's socket, which wakes a
 * backend on the same few cores); a call is still sent after it was made, so it sees every write
 * acknowledged before it.
 */
export class CallBatch<A, R> {
  // A pending item's fn hands back the call's argument.
  private readonly turn = new TurnBatch((items) => {
    this.settle(items);
  });
  private inFlight = 0;
  private waiting: Pending[] = [];

  constructor(
    private readonly run: (args: A[]) => Promise<(R | Promise<R>)[]>,
    private readonly maxInFlight = Number.POSITIVE_INFINITY,
  ) {}

  push(arg: A): Promise<R> {
    return this.turn.push(() => arg) as Promise<unknown> as Promise<R>;
  }

  private settle(items: Pending[]): void {
    if (this.inFlight >= this.maxInFlight) {
      for (const item of items) this.waiting.push(item);
      return;
    }
    this.inFlight++;
    const done = () => {
      this.inFlight--;
      if (this.waiting.length > 0) {
        const next = this.waiting;
        this.waiting = [];
        this.settle(next);
      }
    };
    let ran: Promise<(R | Promise<R>)[]>;
    try {
      ran = this.run(items.map((item) => item.fn() as A));
    } catch (err) {
      ran = Promise.reject(err);
    }
    ran.then(
      (results) => {
        done();
        items.forEach((item, i) => {
          item.resolve(results[i]);
        });
      },
      (err: unknown) => {
        done();
        for (const item of items) item.reject(err);
      },
    );
  }
}
