/**
 * What a caller may do, by the rules the service enforces: the service's own access policy and
 * ETags (pure modules, no I/O), so that a client shows a person only what the service would allow.
 */
import { actorOf, allows, grantableBy, holds, type Role, roleOf, type Scope } from '../access/policy.js';
import { etagOf as etagOfVersion } from '../plants/etag.js';

export { ROLES, SCOPES, type Scope } from '../access/policy.js';

/** Who the caller is, as GET /me answers (`store.me()`). */
interface Caller {
  user: string;
  scopes: readonly string[];
}

/** Whether the caller holds `scope`; plants:admin implies the other plant scopes, and only those. */
export const can = (me: Caller, scope: Scope): boolean => holds(me.scopes, scope);

/**
 * The scopes a token the caller makes may be given (`store.tokens.create`): those it holds; any, to
 * an administrator.
 */
export const grantableScopes = (me: Caller): Scope[] => grantableBy(me.scopes);

/** What the caller may do in a garden: `write` (create, change, delete) its plants, `manage` it. */
export interface Capabilities {
  write: boolean;
  /** Rename, delete, share it, change or remove its members. */
  manage: boolean;
}

/**
 * What the caller may do in a garden, given its role there as GET /gardens answers it (undefined:
 * no member). An administrator acts as an owner in every garden; both need plants:write.
 */
export function capabilities(me: Caller, garden: { role: Role } | undefined): Capabilities {
  const role = roleOf(actorOf(me), garden?.role);
  const writes = holds(me.scopes, 'plants:write');
  return { write: writes && allows(role, 'write'), manage: writes && allows(role, 'manage') };
}

/** A plant's ETag from the version a list gave it (`include: ['version']`), for `ifMatch`. */
export const etagOf = (plant: { version: number }): string => etagOfVersion(plant.version);
