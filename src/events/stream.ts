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
  warn?: (obj: object, msg: string) => void;
}

interface Stream {
  /** The gardens whose events the reader may see, asked afresh at each read (null: every one). */
  visible: () => Promise<string[] | null>;
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
 */
export class EventStreams {
  private readonly streams = new Set<Stream>();
  private readonly pollMs: number;
  private readonly heartbeatMs: number;
  private readonly maxBuffered: number;
  private readonly stallMs: number;
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
  }

  get open(): number {
    return this.streams.size;
  }

  /**
   * Serves one stream on `res` (already hijacked from Fastify) from `position` on, of the events
   * of the gardens `visible` names when each read happens (null: every garden's), so a reader that
   * loses a garden sees nothing more of it from the next read on; resolves when it ends.
   */
  serve(res: ServerResponse, visible: () => Promise<string[] | null>, position: string): Promise<void> {
    return new Promise((resolve) => {
      const stream: Stream = {
        visible,
        position,
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
      .then((gardens) =>
        gardens?.length === 0 ? [] : this.store.listEvents({ after: s.position, gardens, limit: BATCH }),
      )
      .then((events) => {
        let flowing = true;
        // Stops at a full socket: the rest is read again from the log once it drains, so what
        // waits in memory for a reader is at most its socket's buffer and one message.
        for (const e of events) {
          flowing = this.send(s, sseMessage(e));
          s.position = e.position;
          if (s.closed) return;
          if (!flowing) break;
        }
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
