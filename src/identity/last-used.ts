import type { Store } from '../store/store.js';

const MINUTE_MS = 60_000;

export interface LastUsedOptions {
  /** How long uses gather before one write carries them all (default 1 s). */
  flushMs?: number;
  /** Told when a write fails (the next minute's use tries again). */
  warn?: (obj: object, msg: string) => void;
}

/**
 * Keeps each built-in token's `lastUsedAt` to the minute without a write per request.
 *
 * A use costs a map lookup: only the first use of a token in a minute queues it, and the queue is
 * written in one statement a moment later. The store writes a row only when its stored minute is
 * earlier, so however many instances see the token, it is written at most once a minute.
 */
export class LastUsed {
  /** The minute each token was last queued or seen written, by token id. */
  private readonly seen = new Map<string, number>();
  private pending = new Map<number, string[]>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private readonly flushMs: number;

  constructor(
    private readonly store: Store,
    private readonly opts: LastUsedOptions = {},
  ) {
    this.flushMs = opts.flushMs ?? 1000;
  }

  /** What the store said when the token was read: a use in that minute needs no write. */
  known(tokenId: string, lastUsedAt: Date | null): void {
    if (lastUsedAt === null) return;
    const minute = lastUsedAt.getTime();
    if ((this.seen.get(tokenId) ?? -1) < minute) this.seen.set(tokenId, minute);
  }

  /** The token was used at `now`. */
  use(tokenId: string, now: number): void {
    const minute = now - (now % MINUTE_MS);
    if ((this.seen.get(tokenId) ?? -1) >= minute) return;
    this.seen.set(tokenId, minute);
    const ids = this.pending.get(minute);
    if (ids) ids.push(tokenId);
    else this.pending.set(minute, [tokenId]);
    if (this.timer === null) {
      this.timer = setTimeout(() => this.flush(), this.flushMs);
      this.timer.unref();
    }
  }

  /** Writes what is queued; resolves when it is written (or failed). */
  flush(): Promise<void> {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const batch = this.pending;
    this.pending = new Map();
    this.forgetBefore(Date.now() - MINUTE_MS);
    this.flushing = this.flushing.then(async () => {
      for (const [minute, ids] of batch) {
        try {
          await this.store.touchTokens(ids, new Date(minute));
        } catch (err) {
          this.opts.warn?.({ err }, 'could not record when tokens were last used');
        }
      }
    });
    return this.flushing;
  }

  // Entries of past minutes decide nothing (a use now is in a later minute): the map holds only
  // the tokens used in the last minute or two.
  private forgetBefore(t: number): void {
    if (this.seen.size < 1024) return;
    const cut = t - (t % MINUTE_MS);
    for (const [id, minute] of this.seen) if (minute < cut) this.seen.delete(id);
  }
}
