import { type Refusal, refusal, type Verdict } from '../identity/refusal.js';
import type { Scope } from '../schemas/token.js';
import type { Store, TokenRecord } from '../store/store.js';
import { hashToken, isWellFormedToken, tokenStatus } from './tokens.js';

/** Who is calling, once a token has been verified. */
export interface Caller {
  user: string;
  scopes: ReadonlySet<Scope>;
  /** A built-in token's id; for a JWT, `jwt:` and the user (what rate limits count by). */
  tokenId: string;
  /** A built-in token, or a JWT from the identity provider. */
  kind: 'token' | 'jwt';
  /** When the credential stops working on its own: a token's expiry, a JWT's `exp`; null: never. */
  expiresAt: Date | null;
}

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
  ) {}

  /**
   * The caller for a token secret, or why not: malformed, unknown, expired or revoked.
   * A cached answer comes back synchronously (no promise on the hot path); only a lookup in the
   * store returns a promise.
   */
  verify(secret: string, now = Date.now()): Verdict | Promise<Verdict> {
    if (!isWellFormedToken(secret)) return MALFORMED;
    // Keyed by the secret itself, so a cached token costs no hashing; only the hash is ever stored.
    const entry = this.cache.get(secret);
    if (entry && now - entry.fetchedAt < this.ttlMs) return callerOf(entry, now);
    return this.store.findTokenByHash(hashToken(secret)).then((record) => {
      const fresh = entryFor(record, now);
      if (this.cache.size >= this.maxEntries) this.evictStale(now);
      this.cache.set(secret, fresh);
      return callerOf(fresh, now);
    });
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
