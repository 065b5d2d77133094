import type { Store, TokenRecord } from '../store/store.js';
import type { Caller } from './caller.js';
import type { LastUsed } from './last-used.js';
import { type Refusal, refusal, type Verdict } from './refusal.js';
import { hashToken, isWellFormedToken, tokenStatus } from './tokens.js';

interface Entry {
  /** Why not, when the token is unknown, expired or revoked. */
  caller: Caller | Refusal;
  /** When the token stops being valid on its own (expiry), or Infinity; revocation is seen on refetch. */
  validUntil: number;
  fetchedAt: number;
}

const MALFORMED = refusal('builtin', 'malformed');
const UNKNOWN = refusal('builtin', 'unknown');
const EXPIRED = refusal('builtin', 'expired');

function entryFor(record: TokenRecord | null, now: number): Entry {
  if (!record) return { caller: UNKNOWN, validUntil: 0, fetchedAt: now };
  const status = tokenStatus(record, new Date(now));
  if (status !== 'active') return { caller: refusal('builtin', status), validUntil: 0, fetchedAt: now };
  return {
    caller: {
      user: record.user,
      scopes: new Set(record.scopes),
      tokenId: record.id,
      kind: 'token',
      expiresAt: record.expiresAt,
    },
    validUntil: record.expiresAt ? record.expiresAt.getTime() : Number.POSITIVE_INFINITY,
    fetchedAt: now,
  };
}

const callerOf = (entry: Entry, now: number): Verdict =>
  now < entry.validUntil ? entry.caller : 'refused' in entry.caller ? entry.caller : EXPIRED;

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
    /** Told of every accepted use, to keep lastUsedAt (none: not kept, as in the CLI). */
    private readonly lastUsed: LastUsed | null = null,
  ) {}

  /**
   * The caller for a token secret, or why not: malformed, unknown, expired or revoked.
   * A cached answer comes back synchronously (no promise on the hot path); only a lookup in the
   * store returns a promise. `fresh` always asks the store (for requests that make or revoke
   * tokens, which a token revoked a moment ago on another instance must not do).
   */
  verify(secret: string, now = Date.now(), fresh = false): Verdict | Promise<Verdict> {
    if (!isWellFormedToken(secret)) return MALFORMED;
    // Keyed by the secret itself, so a cached token costs no hashing; only the hash is ever stored.
    const entry = this.cache.get(secret);
    if (entry && !fresh && now - entry.fetchedAt < this.ttlMs) return this.used(callerOf(entry, now), now);
    return this.store.findTokenByHash(hashToken(secret)).then((record) => {
      const fresh = entryFor(record, now);
      if (this.cache.size >= this.maxEntries) this.evictStale(now);
      this.cache.set(secret, fresh);
      if (record) this.lastUsed?.known(record.id, record.lastUsedAt);
      return this.used(callerOf(fresh, now), now);
    });
  }

  /** Forgets a token this process revoked, so it is refused here at once (elsewhere within ttlMs). */
  forget(tokenId: string): void {
    for (const [k, e] of this.cache) {
      if (!('refused' in e.caller) && e.caller.tokenId === tokenId) this.cache.delete(k);
    }
  }

  private used(verdict: Verdict, now: number): Verdict {
    if (this.lastUsed !== null && !('refused' in verdict)) this.lastUsed.use(verdict.tokenId, now);
    return verdict;
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
