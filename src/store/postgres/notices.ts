import type pg from 'pg';

/** The channel on which a process that wrote events tells the others, after its commit. */
const CHANNEL = 'plantstore_events';
/** A lost LISTEN connection is opened again after this long (and listeners look at once). */
const RECONNECT_MS = 1_000;

/**
 * Other processes' events, as they commit: one connection per process LISTENs, and a process that
 * wrote events sends one NOTIFY after its commit — at most one at a time, the commits made while
 * one is under way told together by the next. The NOTIFY is not part of the writing transaction on
 * purpose: a transaction that notifies takes PostgreSQL's cluster-wide notify lock until its commit
 * is flushed, so every writer would wait in line behind the others' fsyncs (measured with pgbench,
 * 16 clients inserting one row per transaction: 17,400 → 3,600 transactions/s with a NOTIFY in
 * each; 13,400 → 12,000 with the NOTIFY as its own statement after each commit). A process that
 * dies between its commit and its NOTIFY leaves the others to their slow safety poll.
 */
export class EventNotices {
  private client: pg.Client | undefined;
  private connecting = false;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;
  private notifying = false;
  private again = false;

  constructor(
    /** Opens a connection of its own (to a host that suits, when the URL names several). */
    private readonly open: () => Promise<pg.Client>,
    /** This process's NOTIFYs carry it, so that it does not wake itself a second time. */
    private readonly instance: string,
    private readonly heard: () => void,
  ) {}

  /** Opens the connection and listens (once; again after a lost connection). */
  listen(): void {
    if (this.client || this.connecting || this.closed || this.retry) return;
    this.connecting = true;
    let client: pg.Client | undefined;
    const lost = () => {
      if (client !== undefined && this.client !== client && !this.connecting) return;
      this.client = undefined;
      this.connecting = false;
      client?.end().catch(() => {});
      if (this.closed) return;
      this.retry = setTimeout(() => {
        this.retry = undefined;
        this.listen();
      }, RECONNECT_MS);
      this.retry.unref();
    };
    this.open()
      .then((c) => {
        client = c;
        c.on('error', lost);
        c.on('end', lost);
        c.on('notification', (n) => {
          if (n.payload !== this.instance) this.heard();
        });
        return c.query(`LISTEN ${CHANNEL}`);
      })
      .then(
        () => {
          this.connecting = false;
          if (this.closed) {
            client!.end().catch(() => {});
            return;
          }
          this.client = client;
          // Whatever was committed while nobody listened is found by looking now; what this
          // process committed meanwhile is told now.
          this.heard();
          if (this.again) this.notify();
        },
        () => lost(),
      );
  }

  /**
   * Tells the other processes that this one committed events, on the LISTEN connection (opened now
   * if it is not yet: what is committed meanwhile is told once it is), never on a connection of the
   * pool, whose connections are the requests'.
   */
  notify(): void {
    if (this.closed) return;
    const client = this.client;
    if (client === undefined || this.notifying) {
      this.again = true;
      if (client === undefined) this.listen();
      return;
    }
    this.notifying = true;
    this.again = false;
    // Named, so prepared once per connection: unnamed, PostgreSQL parsed and planned it every time
    // (bench/pg-statements.ts counted one Parse per NOTIFY, some 0.75 per create or delete).
    client
      .query({ name: 'notify', text: 'SELECT pg_notify($1, $2)', values: [CHANNEL, this.instance] })
      .catch(() => {})
      .finally(() => {
        this.notifying = false;
        if (this.again) this.notify();
      });
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    this.retry = undefined;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}
