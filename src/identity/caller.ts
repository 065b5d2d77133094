import { isAdmin as admin, holds, type Scope } from '../access/policy.js';

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

/** Whether the caller holds `scope`, as the access policy reads its scopes. */
export const hasScope = (caller: Caller, scope: Scope): boolean => holds(caller.scopes, scope);

/** Whether the caller is an administrator (access policy). */
export const isAdmin = (caller: Caller): boolean => admin(caller.scopes);
