import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import { StoreUnavailableError } from '../../errors.js';
import { type Pending, TurnBatch } from '../turn-batch.js';
import { FTS5_AUTOMERGE } from './search-merge.js';
import {
  type BatchResult,
  openConnection,
  receiveError,
  type SentError,
  SqliteWrites,
  type WriteName,
  type WriteOp,
} from './writes.js';

type Args<K extends WriteName> = Parameters<SqliteWrites[K]>;
type Result<K extends WriteName> = ReturnType<SqliteWrites[K]>;

/**
 * Where the store's writes run. Every promise settles only after the COMMIT of the write's batch
 * has returned, i.e. after the batch is durable; the writes queued during one turn of the event
 * loop go to the writer together (one transaction, one fsync).
 */
export interface Writer {
  write<K extends WriteName>(op: K, ...args: Args<K>): Promise<Result<K>>;
  /** Called after a batch that wrote events (or queued webhook deliveries) has committed. */
  onQueued(listener: () => void): void;
  /** Settles once the writer can take writes at once (or has failed to start). */
  readonly ready: Promise<void>;
  /** Answers what is queued, then stops; writes after it fail as the store being unavailable. */
  close(): Promise<void>;
}

type Translate = (err: unknown) => unknown;

abstract class BatchingWriter implements Writer {
  protected readonly listeners: (() => void)[] = [];
  protected readonly batch = new TurnBatch((items) => this.send(items));
  protected closed = false;

  constructor(protected readonly translate: Translate) {}

  write<K extends WriteName>(op: K, ...args: Args<K>): Promise<Result<K>> {
    if (this.closed) return Promise.reject(new StoreUnavailableError());
    // The op rides in the pending item's fn slot; send() reads it back.
    const item: WriteOp = { op, args };
    return this.batch.push(() => item) as Promise<Result<K>>;
  }

  onQueued(listener: () => void): void {
    this.listeners.push(listener);
  }

  protected settle(items: Pending[], result: BatchResult): void {
    if (result.queued > 0) for (const listener of this.listeners) listener();
    items.forEach((item, i) => {
      const o = result.outcomes[i]!;
      if (o.ok) item.resolve(o.value);
      else item.reject(this.translate(o.error));
    });
  }

  protected ops(items: Pending[]): WriteOp[] {
    return items.map((item) => item.fn() as WriteOp);
  }

  protected abstract send(items: Pending[]): void;
  abstract readonly ready: Promise<void>;
  abstract close(): Promise<void>;
}

/** Writes on the serving thread's own connection (':memory:', which no other thread can open). */
export class InlineWriter extends BatchingWriter {
  private readonly writes: SqliteWrites;
  readonly ready = Promise.resolve();

  constructor(db: Database.Database, writer: string, translate: Translate) {
    super(translate);
    this.writes = new SqliteWrites(db, writer);
  }

  protected send(items: Pending[]): void {
    let result: BatchResult;
    try {
      result = this.writes.commit(this.ops(items));
    } catch (err) {
      for (const item of items) item.reject(this.translate(err));
      return;
    }
    this.settle(items, result);
    this.leaveMergesToFts5();
  }

  /**
   * This writer does not pace merges (search-merge.ts: that would hold the event loop): FTS5's
   * automerge makes them, set back on once if a thread writer had turned it off.
   */
  private leaveMergesToFts5(): void {
    if (this.automergeSet) return;
    try {
      this.writes.searchAutomerge(FTS5_AUTOMERGE);
      this.automergeSet = true;
    } catch {
      // A busy lock: the next commit tries again.
    }
  }

  private automergeSet = false;

  async close(): Promise<void> {
    this.batch.drainNow();
    this.closed = true;
  }
}

type Reply = { n: number; result: BatchResult } | { n: number; failed: SentError } | 'ready';

/**
 * Writes from a thread of their own, on a connection of their own: a commit and its fsync never
 * hold the event loop, so reads keep being answered while a batch is made durable, and the next
 * batch gathers meanwhile. The serving thread reads through its own connection; WAL lets it read
 * while the writer writes, and SQLite publishes a commit to readers only after it is synced, so a
 * reader never sees a write that is not yet durable.
 */
export class ThreadWriter extends BatchingWriter {
  private worker: Worker | undefined;
  private sent = 0;
  private readonly inFlight = new Map<number, Pending[]>();
  private idle: (() => void) | undefined;
  private started: (() => void) | undefined;
  readonly ready = new Promise<void>((resolve) => (this.started = resolve));

  constructor(
    private readonly path: string,
    private readonly durability: 'full' | 'normal',
    private readonly writer: string,
    translate: Translate,
    /** Merges the search index in paced steps (search-merge.ts); false: FTS5's automerge, in commits. */
    private readonly paced = true,
  ) {
    super(translate);
    // Started now, not at the first write: loading it takes a few hundred ms, which the store's
    // opening and migration cover.
    this.worker = this.start();
  }

  private start(): Worker {
    const workerData = {
      path: this.path,
      durability: this.durability,
      writer: this.writer,
      paced: this.paced,
    };
    // Compiled, the thread's module sits beside this one. Run from source (tsx: tests, `npm run
    // dev`), so does its source, which the thread loads through tsx too: hooks registered on this
    // thread do not reach it, and Node 22 does not read TypeScript by itself.
    const worker = import.meta.url.endsWith('.ts')
      ? new Worker(
          `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((tsx) => { tsx.register();
           return import(${JSON.stringify(new URL('./writer-thread.ts', import.meta.url).href)}); });`,
          { eval: true, workerData },
        )
      : new Worker(new URL('./writer-thread.js', import.meta.url), { workerData });
    worker.on('message', (reply: Reply) => this.receive(reply));
    worker.on('error', () => {});
    worker.once('exit', () => {
      this.started?.();
      if (this.worker === worker) this.worker = undefined;
      // Whatever it had not answered is lost to it: a 503, and the next write starts a new thread.
      for (const items of this.inFlight.values()) {
        for (const item of items) item.reject(new StoreUnavailableError('the SQLite writer stopped'));
      }
      this.inFlight.clear();
      this.checkIdle();
    });
    return worker;
  }

  protected send(items: Pending[]): void {
    const n = ++this.sent;
    this.inFlight.set(n, items);
    this.worker ??= this.start();
    this.worker.ref();
    this.worker.postMessage({ n, ops: this.ops(items) });
  }

  private receive(reply: Reply): void {
    if (reply === 'ready') {
      this.started?.();
      this.checkIdle();
      return;
    }
    const items = this.inFlight.get(reply.n);
    if (items === undefined) return;
    this.inFlight.delete(reply.n);
    if ('failed' in reply) {
      const err = this.translate(receiveError(reply.failed));
      for (const item of items) item.reject(err);
    } else {
      const outcomes = reply.result.outcomes.map((o) =>
        o.ok ? o : { ok: false as const, error: receiveError(o.error as SentError) },
      );
      this.settle(items, { outcomes, queued: reply.result.queued });
    }
    this.checkIdle();
  }

  // Only a start or writes under way keep the process alive (a command that opened the store exits
  // as usual once it is done).
  private checkIdle(): void {
    if (this.inFlight.size > 0) return;
    this.worker?.unref();
    this.idle?.();
  }

  async close(): Promise<void> {
    this.batch.drainNow();
    this.closed = true;
    const worker = this.worker;
    if (worker === undefined) return;
    worker.ref();
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<void>((resolve) => (timer = setTimeout(resolve, 10_000)));
    try {
      // Every batch sent is answered before the thread closes its connection.
      if (this.inFlight.size > 0) await Promise.race([new Promise<void>((r) => (this.idle = r)), limit]);
      worker.ref();
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      worker.postMessage('close');
      await Promise.race([exited, limit]);
    } finally {
      clearTimeout(timer);
      if (this.worker === worker) await worker.terminate();
      this.worker = undefined;
    }
  }
}

export { openConnection };
