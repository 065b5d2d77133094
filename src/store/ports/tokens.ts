import type { Scope } from '../../access/policy.js';
import type { Change } from './change.js';

// Built-in tokens.

export interface TokenRecord {
  id: string;
  user: string;
  name: string | null;
  scopes: Scope[];
  /** Hex SHA-256 of the secret; the secret itself is never stored. */
  hash: string;
  createdAt: Date;
  expiresAt: Date | null;
  revokedAt: Date | null;
  /** The start of the last minute the token was seen in use (kept to the minute); null: never. */
  lastUsedAt: Date | null;
}

/** A page of tokens, newest first (in the order they were made): those made before `before`. */
export interface TokenPageQuery {
  /** Only this user's tokens; null: every user's. */
  user: string | null;
  /** The token the previous page ended with (tokens are never deleted); null: from the newest. */
  before: { id: string } | null;
  limit: number;
}

/** Why a token write wrote nothing: `missing` no such token; `revoked` it is revoked already. */
export type TokenRefusal = 'missing' | 'revoked';

/** The built-in tokens of a store (their secrets never: only hashes). */
export interface TokenPort {
  insertToken(token: TokenRecord): Promise<void>;
  findTokenByHash(hash: string): Promise<TokenRecord | null>;
  findToken(id: string): Promise<TokenRecord | null>;
  /**
   * Those of `ids` whose tokens are neither revoked nor expired at `now`, in one statement (what an
   * open event stream's credential is checked against, many at a time).
   */
  activeTokens(ids: string[], now: Date): Promise<string[]>;
  /** Tokens newest first (in the order they were made, not by createdAt alone), a keyset page at a time. */
  pageTokens(q: TokenPageQuery): Promise<TokenRecord[]>;
  /** Marks a token revoked. */
  revokeToken(id: string, at: Date): Promise<Change<true, TokenRefusal>>;
  /**
   * Sets lastUsedAt to `minute` on those of `ids` whose lastUsedAt is earlier or unset, in one
   * statement; returns how many rows changed. However many processes call it, a token's row is
   * written at most once per minute.
   */
  touchTokens(ids: string[], minute: Date): Promise<number>;
}
