/** The state of one key's window after counting a hit. */
export interface Hit {
  count: number;
  /** Milliseconds until the window resets. */
  resetInMs: number;
}

/** Fixed-window counters. The in-memory one serves one process; a shared one slots in for many. */
export interface RateLimiter {
  /** Counts a hit; a limiter that can answer at once (in memory) answers without a promise. */
  hit(key: string, windowMs: number): Hit | Promise<Hit>;
  close(): Promise<void>;
}

export class MemoryRateLimiter implements RateLimiter {
  private readonly windows = new Map<string, { count: number; resetAt: number }>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly now: () => number = Date.now) {
    this.sweeper = setInterval(() => this.sweep(), 60_000);
    this.sweeper.unref();
  }

  private current(key: string, windowMs: number) {
    const now = this.now();
    let w = this.windows.get(key);
    if (!w || w.resetAt <= now) {
      w = { count: 0, resetAt: now + windowMs };
      this.windows.set(key, w);
    }
    return { w, now };
  }

  hit(key: string, windowMs: number): Hit {
    const { w, now } = this.current(key, windowMs);
    w.count++;
    return { count: w.count, resetInMs: w.resetAt - now };
  }

  private sweep(): void {
    const now = this.now();
    for (const [k, w] of this.windows) if (w.resetAt <= now) this.windows.delete(k);
  }

  close(): Promise<void> {
    clearInterval(this.sweeper);
    return Promise.resolve();
  }
}
