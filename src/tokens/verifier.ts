import type { Scope } from '../schemas/token.js';
import type { Store, TokenRecord } from '../store/store.js';
import { hashToken, isWellFormedToken, tokenStatus } from './tokens.js';

/** Who is calling, once a token has been verified. */
export interface Caller {
  user: string;
  scopes: ReadonlySet<Scope>;
  tokenId: string;
}

interface Entry {
  record: TokenRecord | null;
  fetchedAt: number;
}

/**
 * Verifies bearer tokens against the store, caching lookups for `ttlMs` so the hot path
 * rarely touches the store. A revocation made by another process is seen within ttlMs.
 */
export class TokenVerifier {
  private readonly cache = new Map<string, Entry>();

  constructor(
    private readonly store: Store,
    private readonly ttlMs = 2000,
    private readonly maxEntries = 10_000,
  ) {}

  /** The caller for a token secret, or null when it is malformed, unknown, expired or revoked. */
  async verify(secret: string, now = Date.now()): Promise<Caller | null> {
    if (!isWellFormedToken(secret)) return null;
    const hash = hashToken(secret);
    let entry = this.cache.get(hash);
    if (!entry || now - entry.fetchedAt >= this.ttlMs) {
      entry = { record: await this.store.findTokenByHash(hash), fetchedAt: now };
      if (this.cache.size >= this.maxEntries) this.evictStale(now);
      this.cache.set(hash, entry);
    }
    const rec = entry.record;
    if (!rec || tokenStatus(rec, new Date(now)) !== 'active') return null;
    return { user: rec.user, scopes: new Set(rec.scopes), tokenId: rec.id };
  }

  private evictStale(now: number): void {
    for (const [k, e] of this.cache) if (now - e.fetchedAt >= this.ttlMs) this.cache.delete(k);
    // Still full of fresh entries: drop the oldest half rather than grow without bound.
    if (this.cache.size >= this.maxEntries) {
      let n = this.cache.size / 2;
      for (const k of this.cache.keys()) {
        if (n-- <= 0) break;
        this.cache.delete(k);
      }
    }
  }
}
