import type { ServerResponse } from 'node:http';
import { countDown } from '../counts.js';
import type { EventRecord, Store } from '../store/store.js';
import { EventFeed, type FeedMember, sseMessage } from './feed.js';

export interface StreamOptions {
  /** How often the shared feed reads the log when nothing woke it (a safety net for other processes' events). */
  pollMs?: number;
  /** A comment line at least this often keeps proxies from cutting an idle stream. */
  heartbeatMs?: number;
  /** A reader that lets this many bytes pile up unsent is too slow: it is disconnected. */
  maxBufferedBytes?: number;
  /** A reader that takes nothing for this long while events wait for it is disconnected. */
  stallMs?: number;
  /** How often each credential is asked again (a revoked or expired one ends its streams). */
  authCheckMs?: number;
  /** Open streams one user may have at once in this process; 0: no limit. */
  maxPerUser?: number;
  /** Told of each built-in token found still valid for its open streams (its lastUsedAt is kept so). */
  tokenUsed?: (tokenId: string) => void;
  warn?: (obj: object, msg: string) => void;
}

/** What a stream serves, and for whom. */
export interface StreamRequest {
  /** The user the stream is for: the feed hands it the events of the gardens this user is in. */
  user: string;
  /** The gardens whose events the reader may see, asked afresh before and after each read of its own (null: every one). */
  visible: () => Promise<string[] | null>;
  /** Whether the credential that opened the stream still works; false ends the stream. */
  authorized: () => Promise<boolean>;
  /**
   * Names the credential (streams opened with the same bearer share one check); none: the stream's
   * credential is asked about on its own.
   */
  credential?: string;
  /**
   * The built-in token that opened the stream, if one did: checked in batches, many credentials in
   * one statement (activeTokens), rather than by `authorized`.
   */
  tokenId?: string;
  /** Where in the log the stream starts (after this position). */
  position: string;
  /** The place reserve() gave the stream's user. */
  slot: StreamSlot;
}

/** One of a user's open streams, counted until released (once). */
export interface StreamSlot {
  release(): void;
}

/** A credential and the open streams it opened, asked about once for all of them. */
interface Credential {
  key: unknown;
  check: () => Promise<boolean>;
  /** A built-in token's id: asked about with others in one statement; null: asked by `check`. */
  tokenId: string | null;
  streams: Set<Stream>;
  /** When it was last asked about, and whether that is under way. */
  checkedAt: number;
  asking: boolean;
}

interface Stream extends FeedMember {
  user: string;
  visible: () => Promise<string[] | null>;
  credential: Credential;
  slot: StreamSlot;
  /** Where the stream stands in the log while it reads on its own (not live). */
  position: string;
  res: ServerResponse;
  /** Following the shared feed (else reading the log on its own, or waiting for its socket). */
  live: boolean;
  reading: boolean;
  closed: boolean;
  /** Since when the socket has refused more (its buffers full); 0 while it takes what is sent. */
  blockedSince: number;
  resolve: () => void;
}

const BATCH = 500;
/** Most built-in tokens asked about in one statement. */
const TOKENS_PER_CHECK = 1000;

export { sseMessage };

/**
 * The live event streams of this process. A new stream (or one resuming with Last-Event-ID) reads
 * the log on its own, from its position and of the gardens it may see, until it has reached the
 * process's shared feed (EventFeed); then it joins it, and from there the feed, which reads each
 * batch of the log once for every stream, hands it each event it may see. A stream whose socket
 * is full leaves the feed at the last event it was sent, catches up on its own once the socket
 * drains, and joins again; one that stays full is cut off. The feed is read when the store says
 * events committed (onEvents: this process's at once, other processes' soon after), and when
 * nothing has said so for pollMs (a safety net).
 * Credentials are asked about again about once a second, once for all the streams that share one:
 * a revoked or expired token ends them (contract 3: within 5 s, as any other request with it
 * would be refused).
 */
export class EventStreams {
  private readonly streams = new Set<Stream>();
  private readonly perUser = new Map<string, number>();
  private readonly credentials = new Map<unknown, Credential>();
  /** Streams waiting for their socket to drain (not live, not reading). */
  private readonly blocked = new Set<Stream>();
  private readonly feed: EventFeed<Stream>;
  private readonly pollMs: number;
  private readonly heartbeatMs: number;
  private readonly maxBuffered: number;
  private readonly stallMs: number;
  private readonly authCheckMs: number;
  readonly maxPerUser: number;
  private poll: NodeJS.Timeout | undefined;
  /** Where the keep-alive comments have got to in the streams. */
  private beating: Iterator<Stream> | undefined;
  /** When the keep-alive comments were last counted out, and the share of a comment owed since. */
  private beatAt = 0;
  private beatDue = 0;
  /** Unsubscribes from the store's onEvents while no stream is open. */
  private unlisten: (() => void) | undefined;
  private wokenAt = 0;

  constructor(
    private readonly store: Store,
    private readonly opts: StreamOptions = {},
  ) {
    this.pollMs = opts.pollMs ?? 500;
    this.heartbeatMs = opts.heartbeatMs ?? 15_000;
    this.maxBuffered = opts.maxBufferedBytes ?? 1 << 20;
    this.stallMs = opts.stallMs ?? 30_000;
    this.authCheckMs = opts.authCheckMs ?? 1000;
    this.maxPerUser = opts.maxPerUser ?? 20;
    this.feed = new EventFeed<Stream>(store, (s, e, message) => this.deliver(s, e, message), opts.warn);
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
        countDown(this.perUser, user);
      },
    };
  }

  get open(): number {
    return this.streams.size;
  }

  /** How many streams follow the shared feed now, and how many reads of the log it has made. */
  get feedStats(): { live: number; reads: number } {
    return { live: this.feed.size, reads: this.feed.reads };
  }

  /**
   * Serves one stream on `res` (already hijacked from Fastify) from `position` on, of the events
   * of the gardens its user is in when each is read (every garden's for an admin), so a reader that
   * loses a garden sees nothing more of it from the next event on; resolves when it ends.
   */
  serve(res: ServerResponse, req: StreamRequest): Promise<void> {
    return new Promise((resolve) => {
      const stream: Stream = {
        feedUser: req.user,
        after: null,
        user: req.user,
        visible: req.visible,
        credential: undefined as unknown as Credential,
        slot: req.slot,
        position: req.position,
        res,
        live: false,
        reading: false,
        closed: false,
        blockedSince: 0,
        resolve,
      };
      stream.credential = this.credentialFor(req.credential ?? stream, req.authorized, req.tokenId ?? null);
      stream.credential.streams.add(stream);
      this.streams.add(stream);
      res.on('close', () => this.end(stream));
      res.on('drain', () => this.drained(stream));
      res.write(': plantstore event stream\nretry: 2000\n\n');
      this.ensureTimers();
      this.read(stream);
    });
  }

  /** Reads now (an event just committed, in this process or another). */
  nudge(): void {
    this.wokenAt = Date.now();
    this.feed.wake();
  }

  private credentialFor(key: unknown, check: () => Promise<boolean>, tokenId: string | null): Credential {
    let c = this.credentials.get(key);
    if (c === undefined) {
      c = { key, check, tokenId, streams: new Set(), checkedAt: Date.now(), asking: false };
      this.credentials.set(key, c);
    }
    return c;
  }

  // While a reader's buffers are full nothing more is read for it (memory stays bounded); one that
  // stays so is too slow to keep up, and is cut off so that it can resume with Last-Event-ID.
  private cutStalled(): void {
    const now = Date.now();
    for (const s of this.blocked) {
      if (now - s.blockedSince >= this.stallMs) {
        this.opts.warn?.({ stalledMs: now - s.blockedSince }, 'event stream reader too slow: disconnected');
        s.res.destroy();
        this.end(s);
      }
    }
  }

  // A credential that no longer works ends its streams, cleanly: a client that reconnects is
  // refused. Each is asked about once for all its streams, authCheckMs after it was last; they fall
  // due at different times, as their streams were opened. Built-in tokens due together are asked
  // about in one statement (neither revoked nor expired, as the verifier would find them when it
  // asks the store; each found valid counts as a use, as a request's verification would); other
  // credentials (JWTs: their verifier keeps what it found until their `exp`) through `check`.
  private checkCredentials(): void {
    const now = Date.now();
    const tokens: Credential[] = [];
    for (const c of this.credentials.values()) {
      if (c.asking || now - c.checkedAt < this.authCheckMs) continue;
      c.asking = true;
      if (c.tokenId !== null) {
        tokens.push(c);
        continue;
      }
      c.check().then(
        (ok) => this.checked(c, ok),
        () => this.checked(c, true),
      );
    }
    for (let i = 0; i < tokens.length; i += TOKENS_PER_CHECK) {
      const batch = tokens.slice(i, i + TOKENS_PER_CHECK);
      this.store
        .activeTokens(
          batch.map((c) => c.tokenId!),
          new Date(now),
        )
        .then(
          (active) => {
            const ok = new Set(active);
            for (const id of active) this.opts.tokenUsed?.(id);
            for (const c of batch) this.checked(c, ok.has(c.tokenId!));
          },
          // The store cannot answer: the streams go on as they were, and are asked about again.
          () => {
            for (const c of batch) this.checked(c, true);
          },
        );
    }
  }

  private checked(c: Credential, ok: boolean): void {
    c.asking = false;
    c.checkedAt = Date.now();
    if (ok) return;
    for (const s of c.streams) {
      s.res.end();
      this.end(s);
    }
  }

  /** Ends every stream cleanly (shutdown). */
  closeAll(): void {
    for (const s of this.streams) {
      s.res.end();
      this.end(s);
    }
  }

  // While streams are open: the store says when events commit (this process's at once, others'
  // soon after), and a tick looks at stalled readers and credentials due, writes the keep-alive
  // comments due, and reads the log when nothing has woken the feed for pollMs (the safety net).
  private ensureTimers(): void {
    if (this.poll) return;
    this.unlisten = this.store.onEvents(() => this.nudge());
    const tickMs = Math.max(10, Math.min(this.pollMs, 250, this.heartbeatMs / 4));
    this.beatAt = Date.now();
    this.beatDue = 0;
    this.poll = setInterval(() => {
      this.cutStalled();
      this.checkCredentials();
      this.beat(Date.now());
      if (Date.now() - this.wokenAt >= this.pollMs) this.nudge();
    }, tickMs);
    this.poll.unref();
  }

  // The keep-alive comments, a slice of the streams at each tick, so that every stream has one at
  // least every heartbeatMs without a pause of the event loop to write to every socket at once
  // (10,000 writes in one go would hold events back for a fifth of a second). A pass over the
  // streams takes 80 % of heartbeatMs: streams opened during one are also reached within it.
  // The slice is a share of the streams that accrues with the time gone by: a fraction of a
  // stream waits for the next tick rather than being rounded up to a whole one (rounded up, one
  // open stream had a comment at every tick, 60 a minute instead of about 4), and a tick that
  // comes late writes for the time it missed.
  private beat(now: number): void {
    const elapsed = Math.min(now - this.beatAt, this.heartbeatMs);
    this.beatAt = now;
    this.beatDue += (this.streams.size * Math.max(0, elapsed)) / (this.heartbeatMs * 0.8);
    let n = Math.floor(this.beatDue);
    this.beatDue -= n;
    while (n-- > 0) {
      let next = this.beating?.next();
      if (next === undefined || next.done) {
        this.beating = this.streams.values();
        next = this.beating.next();
        if (next.done) return;
      }
      const s = next.value;
      if (!this.send(s, ': keep-alive\n\n') && s.live && !s.closed) {
        // Between batches: the feed's position is where the stream stands.
        s.position = this.feed.leave(s) ?? s.position;
        s.live = false;
        this.block(s);
      }
    }
  }

  private end(s: Stream): void {
    if (s.closed) return;
    s.closed = true;
    if (s.live) this.feed.leave(s);
    s.live = false;
    this.blocked.delete(s);
    this.streams.delete(s);
    s.credential.streams.delete(s);
    if (s.credential.streams.size === 0) this.credentials.delete(s.credential.key);
    s.slot.release();
    if (this.streams.size === 0) {
      clearInterval(this.poll);
      this.unlisten?.();
      this.poll = undefined;
      this.beating = undefined;
      this.unlisten = undefined;
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

  // An event from the feed. A socket that fills up takes the stream out of the feed, at this
  // event: the feed never waits for a reader, and what waits in memory for one is at most its
  // socket's buffer and one message.
  private deliver(s: Stream, e: EventRecord, message: string): void {
    const flowing = this.send(s, message);
    if (flowing || s.closed) return;
    this.feed.leave(s);
    s.live = false;
    s.position = e.position;
    this.block(s);
  }

  private block(s: Stream): void {
    if (s.blockedSince === 0) s.blockedSince = Date.now();
    this.blocked.add(s);
  }

  private drained(s: Stream): void {
    if (s.live || s.closed) return;
    s.blockedSince = 0;
    this.blocked.delete(s);
    this.read(s);
  }

  // The stream reads the log on its own, after its position and of the gardens it may see now,
  // until it has reached the feed; then it joins it, with no gap and no event twice (the feed
  // hands it only what comes after where it stands).
  //
  // Its memberships are read again after the events, as the feed reads them (feed.ts): the
  // events' snapshot is later than the first read of them, so a garden joined in between (on
  // this instance or another: a home garden made by the reader's first create elsewhere) may
  // have events in it that the read left out; then the same stretch is read again with the
  // gardens as they are now. And an event of a garden the reader has left by then is not shown.
  private read(s: Stream): void {
    if (s.reading || s.closed || s.live) return;
    if (s.res.writableNeedDrain) {
      this.block(s);
      return;
    }
    s.reading = true;
    let asked: string[] | null = null;
    s.visible()
      .then((gardens) => {
        asked = gardens;
        s.feedUser = gardens === null ? null : s.user;
        return this.store.readEvents({ after: s.position, gardens, limit: BATCH });
      })
      .then(async (read) => ({ read, now: asked === null ? null : await s.visible() }))
      .then(({ read: { events, position }, now }) => {
        s.reading = false;
        if (s.closed) return;
        const visible = now === null ? null : new Set(now);
        if (now !== null && asked !== null) {
          const before = new Set<string>(asked);
          if (now.some((g) => !before.has(g))) {
            this.read(s);
            return;
          }
        }
        for (const e of events) {
          if (visible !== null && !visible.has(e.garden)) {
            s.position = e.position;
            continue;
          }
          const flowing = this.send(s, sseMessage(e));
          s.position = e.position;
          if (s.closed) return;
          // The rest is read again from the log once the socket drains.
          if (!flowing) {
            this.block(s);
            return;
          }
        }
        // Everything up to where the store looked was sent: go on from there.
        s.position = position;
        if (events.length < BATCH && this.feed.canJoin(position)) {
          this.feed.join(s, position);
          s.live = true;
          return;
        }
        // More is waiting, or the feed is further on: read on (at once when there was something).
        if (events.length > 0) this.read(s);
        else setTimeout(() => this.read(s), 20).unref();
      })
      .catch((err) => {
        s.reading = false;
        this.opts.warn?.({ err }, 'event stream could not read the log; will retry');
        setTimeout(() => this.read(s), this.pollMs).unref();
      });
  }
}
