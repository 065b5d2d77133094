import { createHash, randomBytes } from 'node:crypto';
import type { Scope } from '../schemas/token.js';
import type { Store, TokenRecord } from '../store/store.js';

export const TOKEN_PREFIX = 'pst_';
// pst_ + base64url of 32 random bytes (43 characters).
const TOKEN_SHAPE = /^pst_[A-Za-z0-9_-]{43}$/;
const USER_SHAPE = /^[\x21-\x7E]{1,200}$/;
// tok_ + base64url of 9 random bytes (12 characters).
const TOKEN_ID_SHAPE = /^tok_[A-Za-z0-9_-]{12}$/;

/** Hex SHA-256 of a token secret: the only form in which a token is stored. */
export function hashToken(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export function isWellFormedToken(secret: string): boolean {
  return TOKEN_SHAPE.test(secret);
}

export function isTokenId(id: string): boolean {
  return TOKEN_ID_SHAPE.test(id);
}

export function isValidUser(user: string): boolean {
  return USER_SHAPE.test(user);
}

export interface NewToken {
  user: string;
  scopes: Scope[];
  name: string | null;
  /** Lifetime from now; null: never expires. */
  expiresInMs: number | null;
  /** The latest it may expire (the maker's own expiry); null: no bound. */
  notAfter?: Date | null;
}

// A token made by a token that expires never outlives it: without a lifetime of its own it gets
// the maker's expiry (the caller refuses a longer one before this is reached).
function expiryOf(input: NewToken, now: Date): Date | null {
  const own = input.expiresInMs === null ? null : now.getTime() + input.expiresInMs;
  const bound = input.notAfter ? input.notAfter.getTime() : null;
  if (own === null) return bound === null ? null : new Date(bound);
  return new Date(bound === null ? own : Math.min(own, bound));
}

/** Creates and stores a token; the secret is returned here once and never again. */
export async function createToken(
  store: Store,
  input: NewToken,
  now = new Date(),
): Promise<{ record: TokenRecord; secret: string }> {
  const secret = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  const record: TokenRecord = {
    id: `tok_${randomBytes(9).toString('base64url')}`,
    user: input.user,
    name: input.name,
    scopes: [...new Set(input.scopes)],
    hash: hashToken(secret),
    createdAt: now,
    expiresAt: expiryOf(input, now),
    revokedAt: null,
    lastUsedAt: null,
  };
  await store.insertToken(record);
  return { record, secret };
}

export type TokenStatus = 'active' | 'expired' | 'revoked';

export function tokenStatus(t: TokenRecord, now = new Date()): TokenStatus {
  if (t.revokedAt) return 'revoked';
  if (t.expiresAt && t.expiresAt.getTime() <= now.getTime()) return 'expired';
  return 'active';
}
