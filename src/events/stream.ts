import type { ServerResponse } from 'node:http';
import type { EventRecord, Store } from '../store/store.js';
import { eventPayload } from './event.js';

export interface StreamOptions {
  /** How often the log is read for the open streams (events from other processes arrive this way). */
  pollMs?: number;
  /** A comment line at least this often keeps proxies from cutting an idle stream. */
  heartbeatMs?: number;
  /** A reader that lets this many bytes pile up unsent is too slow: it is disconnected. */
  maxBufferedBytes?: number;
  /** A reader that takes nothing for this long while events wait for it is disconnected. */
  stallMs?: number;
  /** How often each stream's credential is asked again (a revoked or expired one ends the stream). */
  authCheckMs?: number;
  /** Open streams one user may have at once in this process; 0: no limit. */
  maxPerUser?: number;
  warn?: (obj: object, msg: string) => void;
}

/** What a stream serves, and for whom. */
export interface StreamRequest {
  /** The gardens whose events the reader may see, asked afresh at each read (null: every one). */
  visible: () => Promise<string[] | null>;
  /** Whether the credential that opened the stream still works; false ends the stream. */
  authorized: () => Promise<boolean>;
  /** Where in the log the stream starts (after this position). */
  position: string;
  /** The place reserve() gave the stream's user. */
  slot: StreamSlot;
}

/** One of a user's open streams, counted until released (once). */
export interface StreamSlot {
  release(): void;
}

interface Stream {
  visible: () => Promise<string[] | null>;
  authorized: () => Promise<boolean>;
  slot: StreamSlot;
  /** When the credential was last asked about, and whether that is under way. */
  authAt: number;
  authAsking: boolean;
  position: string;
  res: ServerResponse;
  reading: boolean;
  /** Asked to read while a read was running: read again when it ends. */
  more: boolean;
  closed: boolean;
  /** Since when the socket has refused more (its buffers full); 0 while it takes what is sent. */
  blockedSince: number;
  resolve: () => void;
}

const BATCH = 500;

/** SSE message for one event: `id`, `event`, `data` lines (CONTRACT.md section 8). */
export const sseMessage = (e: EventRecord): string =>
  `id: ${e.id}\nevent: ${e.type}\ndata: ${JSON.stringify(eventPayload(e))}\n\n`;

/**
 * The live event streams of this process. Each stream reads the log after its own position, so a
 * stream that resumes (Last-Event-ID) catches up first and then follows, missing nothing; the log
 * is read on a short interval (other processes' events) and at once when this process writes one.
 * A read moves the stream's position as far as the store looked, not only to the last event the
 * reader may see, so a quiet reader is not shown the same stretch of others' events again. Every
 * stream's credential is asked again about once a second: a revoked or expired token ends it
 * (contract 3: within 5 s, as any other request with it would be refused).
 */
export class EventStreams {
  private readonly streams = new Set<Stream>();
  private readonly perUser = new Map<string, number>();
  private readonly pollMs: number;
  private readonly heartbeatMs: number;
  private readonly maxBuffered: number;
  private readonly stallMs: number;
  private readonly authCheckMs: number;
  readonly maxPerUser: number;
  private poll: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: Store,
    private readonly opts: StreamOptions = {},
  ) {
    this.pollMs = opts.pollMs ?? 250;
    this.heartbeatMs = opts.heartbeatMs ?? 15_000;
    this.maxBuffered = opts.maxBufferedBytes ?? 1 << 20;
    this.stallMs = opts.stallMs ?? 30_000;
    this.authCheckMs = opts.authCheckMs ?? 1000;
    this.maxPerUser = opts.maxPerUser ?? 20;
  }

  /**
   * A place for one more open stream of `user`, or null when it has as many as a user may (the
   * place is taken at once, so streams opened together cannot all slip under the limit).
   */
  reserve(user: string): StreamSlot | null {
    const n = this.perUser.get(user) ?? 0;
    if (this.maxPerUser > 0 && n >= this.maxPerUser) return null;
    this.perUser.set(user, n + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        const left = (this.perUser.get(user) ?? 1) - 1;
        if (left <= 0) this.perUser.delete(user);
        else this.perUser.set(user, left);
      },
    };
  }

  get open(): number {
    return this.streams.size;
  }

  /**
   * Serves one stream on `res` (already hijacked from Fastify) from `position` on, of the events
   * of the gardens `visible` names when each read happens (null: every garden's), so a reader that
   * loses a garden sees nothing more of it from the next read on; resolves when it ends.
   */
  serve(res: ServerResponse, req: StreamRequest): Promise<void> {
    return new Promise((resolve) => {
      const stream: Stream = {
        visible: req.visible,
        authorized: req.authorized,
        slot: req.slot,
        authAt: Date.now(),
        authAsking: false,
        position: req.position,
        res,
        reading: false,
        more: false,
        closed: false,
        blockedSince: 0,
        resolve,
      };
      this.streams.add(stream);
      res.on('close', () => this.end(stream));
      res.on('drain', () => {
        stream.blockedSince = 0;
        this.read(stream);
      });
      res.write(': plantstore event stream\nretry: 2000\n\n');
      this.ensureTimers();
      this.read(stream);
    });
  }

  /** Reads now (an event just committed in this process). */
  nudge(): void {
    for (const s of this.streams) this.read(s);
  }

  // While a reader's buffers are full nothing more is read for it (memory stays bounded); one that
  // stays so is too slow to keep up, and is cut off so that it can resume with Last-Event-ID.
  private cutStalled(): void {
    const now = Date.now();
    for (const s of this.streams) {
      if (!s.res.writableNeedDrain) continue;
      if (s.blockedSince === 0) s.blockedSince = now;
      else if (now - s.blockedSince >= this.stallMs) {
        this.opts.warn?.({ stalledMs: now - s.blockedSince }, 'event stream reader too slow: disconnected');
        s.res.destroy();
        this.end(s);
      }
    }
  }

  // A stream whose credential no longer works ends, cleanly: a client that reconnects is refused.
  private checkCredentials(): void {
    const now = Date.now();
    for (const s of this.streams) {
      if (s.authAsking || now - s.authAt < this.authCheckMs) continue;
      s.authAsking = true;
      s.authorized().then(
        (ok) => {
          s.authAsking = false;
          s.authAt = Date.now();
          if (!ok && !s.closed) {
            s.res.end();
            this.end(s);
          }
        },
        () => {
          s.authAsking = false;
          s.authAt = Date.now();
        },
      );
    }
  }

  /** Ends every stream cleanly (shutdown). */
  closeAll(): void {
    for (const s of this.streams) {
      s.res.end();
      this.end(s);
    }
  }

  private ensureTimers(): void {
    if (this.poll) return;
    this.poll = setInterval(() => {
      this.cutStalled();
      this.checkCredentials();
      this.nudge();
    }, this.pollMs);
    this.heartbeat = setInterval(() => {
      for (const s of this.streams) this.send(s, ': keep-alive\n\n');
    }, this.heartbeatMs);
    this.poll.unref();
    this.heartbeat.unref();
  }

  private end(s: Stream): void {
    if (s.closed) return;
    s.closed = true;
    this.streams.delete(s);
    s.slot.release();
    if (this.streams.size === 0) {
      clearInterval(this.poll);
      clearInterval(this.heartbeat);
      this.poll = undefined;
      this.heartbeat = undefined;
    }
    s.resolve();
  }

  /** Writes; a reader that lets too much pile up is disconnected rather than buffered without bound. */
  private send(s: Stream, text: string): boolean {
    if (s.closed) return false;
    s.res.write(text);
    if (s.res.writableLength > this.maxBuffered) {
      this.opts.warn?.({ buffered: s.res.writableLength }, 'event stream reader too slow: disconnected');
      s.res.destroy();
      this.end(s);
      return false;
    }
    return !s.res.writableNeedDrain;
  }

  private read(s: Stream): void {
    if (s.reading) s.more = true;
    if (s.reading || s.closed || s.res.writableNeedDrain) return;
    s.reading = true;
    s.more = false;
    s.visible()
      .then((gardens) => this.store.readEvents({ after: s.position, gardens, limit: BATCH }))
      .then(({ events, position }) => {
        let flowing = true;
        // Stops at a full socket: the rest is read again from the log once it drains, so what
        // waits in memory for a reader is at most its socket's buffer and one message.
        for (const e of events) {
          flowing = this.send(s, sseMessage(e));
          s.position = e.position;
          if (s.closed) return;
          if (!flowing) break;
        }
        // Everything up to where the store looked was sent: go on from there.
        if (flowing && !s.closed) s.position = position;
        s.reading = false;
        // A full batch means more is waiting: read on at once unless the reader must drain first.
        if ((events.length === BATCH || s.more) && flowing) this.read(s);
      })
      .catch((err) => {
        s.reading = false;
        this.opts.warn?.({ err }, 'event stream could not read the log; will retry');
      });
  }
}
