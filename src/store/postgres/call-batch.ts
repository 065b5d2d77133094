import { type Pending, TurnBatch } from '../turn-batch.js';

/**
 * The calls of one kind queued in a turn (TurnBatch), answered by one call of `run`, which gives
 * an outcome per argument, in order (a promise for one settled on its own); when `run` fails,
 * every call of the batch fails with its error.
 */
export class CallBatch<A, R> {
  // A pending item's fn hands back the call's argument.
  private readonly turn = new TurnBatch((items) => {
    this.settle(items);
  });

  constructor(private readonly run: (args: A[]) => Promise<(R | Promise<R>)[]>) {}

  push(arg: A): Promise<R> {
    return this.turn.push(() => arg) as Promise<unknown> as Promise<R>;
  }

  private settle(items: Pending[]): void {
    this.run(items.map((item) => item.fn() as A)).then(
      (results) => {
        items.forEach((item, i) => {
          item.resolve(results[i]);
        });
      },
      (err: unknown) => {
        for (const item of items) item.reject(err);
      },
    );
  }
}
