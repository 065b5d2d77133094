import type { Scope } from '../schemas/token.js';

/** Who is calling, once a bearer value (built-in token or JWT) has been verified. */
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

/** Whether the caller holds `scope`; plants:admin implies the other plant scopes, and only those. */
export function hasScope(caller: Caller, scope: Scope): boolean {
  return caller.scopes.has(scope) || (scope.startsWith('plants:') && caller.scopes.has('plants:admin'));
}

export const isAdmin = (caller: Caller): boolean => caller.scopes.has('plants:admin');
