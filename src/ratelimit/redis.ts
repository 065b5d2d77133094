import { Redis } from 'ioredis';
import type { Hit, RateLimiter } from './limiter.js';

// INCR and set the window's expiry atomically, so every instance counts in the same window.
const HIT = `
local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local t = redis.call('PTTL', KEYS[1])
if t < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); t = tonumber(ARGV[1]) end
return {c, t}`;

/**
 * Fixed-window counters in Redis, shared by every instance. If Redis cannot be reached the
 * limiter fails open (counts nothing) rather than failing requests: a rate limit is a guard, not
 * a dependency; `errors` counts how often that happened.
 */
export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Redis;
  errors = 0;

  constructor(
    url: string,
    private readonly prefix = 'plantstore:rl:',
  ) {
    this.redis = new Redis(url, {
      // Commands wait for the first connection, but never long: a slow Redis must not slow requests.
      maxRetriesPerRequest: 1,
      connectTimeout: 1000,
      commandTimeout: 500,
    });
    this.redis.on('error', () => {
      this.errors++;
    });
    this.redis.defineCommand('plantstoreHit', { numberOfKeys: 1, lua: HIT });
  }

  async hit(key: string, windowMs: number): Promise<Hit> {
    try {
      const [count, ttl] = (await (
        this.redis as unknown as { plantstoreHit(k: string, w: number): Promise<[number, number]> }
      ).plantstoreHit(this.prefix + key, windowMs)) as [number, number];
      return { count, resetInMs: ttl };
    } catch {
      this.errors++;
      return { count: 0, resetInMs: windowMs };
    }
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
