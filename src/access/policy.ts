// Who may see and do what: the one place the access rules of the plant store are written.
//
// Pure: no I/O, no HTTP, no SQL, no imports. The services, the event stream, the dispatcher and
// both engines ask it; an engine reads the facts a rule needs (a role, a member count) in its own
// SQL, inside its own transaction, and lets this module decide. The typed client ships it too, so
// the console shows what a caller may do by the same rules the server enforces.

/** A member's role in a garden, weakest first. */
export const ROLES = ['viewer', 'editor', 'owner'] as const;
export type Role = (typeof ROLES)[number];

/** A credential's scopes. */
export const SCOPES = ['plants:read', 'plants:write', 'plants:admin', 'tokens:manage'] as const;
export type Scope = (typeof SCOPES)[number];

/**
 * What a caller does in a garden: `read` its plants, events and members; `write` (create, change,
 * delete) its plants; `manage` it (rename, delete, share, change or remove members).
 */
export type Action = 'read' | 'write' | 'manage';

const RANK: Record<Role, number> = { viewer: 0, editor: 1, owner: 2 };
const LEAST: Record<Action, Role> = { read: 'viewer', write: 'editor', manage: 'owner' };

/** Whether `role` (null or undefined: no member) may do `action` in its garden. */
export const allows = (role: Role | null | undefined, action: Action): boolean =>
  role != null && RANK[role] >= RANK[LEAST[action]];

/** The least role that may do `action` (what a refusal says is needed). */
export const leastRole = (action: Action): Role => LEAST[action];

/** The roles that may do `action`: what an engine's SQL checks a member's role against. */
export const rolesFor = (action: Action): readonly Role[] => ROLES.filter((r) => allows(r, action));

// --- Scopes ----------------------------------------------------------------------------------------

type Scopes = ReadonlySet<string> | readonly string[];
const has = (scopes: Scopes, s: string) =>
  Array.isArray(scopes) ? scopes.includes(s) : (scopes as ReadonlySet<string>).has(s);

/** Whether scopes hold `scope`; plants:admin implies the other plant scopes, and only those. */
export const holds = (scopes: Scopes, scope: Scope): boolean =>
  has(scopes, scope) || (scope.startsWith('plants:') && has(scopes, 'plants:admin'));

/** An administrator: every garden's owner, whether a member or not. */
export const isAdmin = (scopes: Scopes): boolean => has(scopes, 'plants:admin');

/** The scopes a token made by a holder of `scopes` may carry: exactly those it holds itself. */
export const grantable = (scopes: Scopes): Scope[] => SCOPES.filter((s) => has(scopes, s));

/**
 * The scopes a token made by a holder of `scopes` may be given: any, by an administrator (who
 * makes tokens for every user); by anyone else, those `grantable` names.
 */
export const grantableBy = (scopes: Scopes): Scope[] => (isAdmin(scopes) ? [...SCOPES] : grantable(scopes));

/**
 * Who acts on a garden: a user, or null for an administrator. An administrator acts as an owner
 * in every garden, member or not.
 */
export type Actor = string | null;
export const actorOf = (c: { user: string; scopes: Scopes }): Actor => (isAdmin(c.scopes) ? null : c.user);

/** The role an actor acts with, given its membership's role (null: no member). */
export const roleOf = (actor: Actor, memberRole: Role | null | undefined): Role | null =>
  actor === null ? 'owner' : (memberRole ?? null);

// --- Gardens and members ---------------------------------------------------------------------------

/** The role a garden's maker gets in it (a home garden's user in its home garden too). */
export const MAKER_ROLE: Role = 'owner';

/** How many gardens a user may make (its home garden among them). */
export const MAX_GARDENS_CREATED = 100;
/** How many gardens a user may belong to (its home garden among them). */
export const MAX_MEMBERSHIPS_PER_USER = 1000;
/** How many members a garden may have. */
export const MAX_MEMBERS_PER_GARDEN = 1000;
/** How many webhook endpoints a user may own. */
export const MAX_ENDPOINTS_PER_USER = 20;

/**
 * Why a garden write is refused: `missing` the garden does not exist or the actor is no member of
 * it (indistinguishable on purpose); `forbidden` the actor's role is too weak; `no_member` the user
 * named is no member; `home_garden` a home garden cannot be deleted, nor its user's membership
 * changed; `last_owner` a garden keeps at least one owner; `too_many_*` a limit above;
 * `garden_not_empty` a garden with plants cannot be deleted.
 */
export type GardenRefusal =
  | 'missing'
  | 'forbidden'
  | 'no_member'
  | 'home_garden'
  | 'last_owner'
  | 'too_many_gardens'
  | 'too_many_members'
  | 'garden_not_empty';

/** A garden as a write finds it: whose home it is, and the actor's role in it (null: no member). */
export interface GardenFacts {
  homeUser: string | null;
  /** The actor's role as roleOf gives it (an administrator: owner). */
  role: Role | null;
}

/** A member as a write finds it, with the counts its rules need. */
export interface MemberFacts {
  /** The user's role now; null: not a member. */
  was: Role | null;
  /** How many owners the garden has now. */
  owners: number;
  /** How many members the garden has now. */
  members: number;
  /**
   * How many gardens the user belongs to now, counting its home garden even before it is made (a
   * user without one keeps a place for it).
   */
  userGardens: number;
}

/** Whether a garden may be renamed by an actor with these facts. */
export function mayRename(g: GardenFacts | null): GardenRefusal | null {
  if (g === null || g.role === null) return 'missing';
  return allows(g.role, 'manage') ? null : 'forbidden';
}

/** Whether a garden may be deleted: by an owner, never a home garden, only once empty. */
export function mayDelete(g: GardenFacts | null, hasPlants: boolean): GardenRefusal | null {
  const refusal = mayRename(g);
  if (refusal !== null) return refusal;
  if (g!.homeUser !== null) return 'home_garden';
  return hasPlants ? 'garden_not_empty' : null;
}

/**
 * Whether `user` may be given `role` in the garden: an owner adds members up to the limits, and
 * changes roles except its home garden user's, and never the last owner's.
 */
export function mayPutMember(
  g: GardenFacts | null,
  user: string,
  role: Role,
  m: MemberFacts,
): GardenRefusal | null {
  const refusal = mayRename(g);
  if (refusal !== null) return refusal;
  if (m.was === null) {
    if (m.userGardens >= MAX_MEMBERSHIPS_PER_USER) return 'too_many_gardens';
    return m.members >= MAX_MEMBERS_PER_GARDEN ? 'too_many_members' : null;
  }
  if (m.was === role) return null;
  if (g!.homeUser === user) return 'home_garden';
  return m.was === 'owner' && m.owners <= 1 ? 'last_owner' : null;
}

/**
 * Whether `user` may be removed from the garden by `actor`: an owner removes anyone, a member may
 * always leave; never a home garden's user, never the last owner.
 */
export function mayRemoveMember(
  g: GardenFacts | null,
  actor: Actor,
  user: string,
  m: Pick<MemberFacts, 'was' | 'owners'>,
): GardenRefusal | null {
  if (g === null || g.role === null) return 'missing';
  if (!allows(g.role, 'manage') && actor !== user) return 'forbidden';
  if (m.was === null) return 'no_member';
  if (g.homeUser === user) return 'home_garden';
  return m.was === 'owner' && m.owners <= 1 ? 'last_owner' : null;
}

/**
 * Whether a user may make another garden: `made` gardens it made and `member` it belongs to, each
 * counting its home garden even before it is made.
 */
export const mayCreateGarden = (made: number, member: number): GardenRefusal | null =>
  made >= MAX_GARDENS_CREATED || member >= MAX_MEMBERSHIPS_PER_USER ? 'too_many_gardens' : null;

// --- Visibility ------------------------------------------------------------------------------------

/**
 * The gardens a caller sees: null for every garden (an administrator), otherwise those it is a
 * member of, read afresh for each decision.
 */
export type Visible = ReadonlySet<string> | readonly string[] | null;

/** Whether a caller who sees `visible` sees a plant, or an event, of `garden`. */
export const sees = (visible: Visible, garden: string): boolean =>
  visible === null || has(visible as Scopes, garden);

/** What a webhook endpoint records of its maker's credential, for its reach over every garden. */
export interface EndpointReach {
  /** Made with plants:admin by a credential that expires or can be revoked. */
  admin: boolean;
  /** The built-in token that made it (its revocation ends the reach). */
  adminTokenId: string | null;
  /** When the credential that made it expires (null: never). */
  adminUntil: Date | null;
}

/**
 * The reach an endpoint made by this caller gets. Made with plants:admin, it receives every user's
 * events only while that credential is valid; a credential that could never be bounded (a JWT
 * without exp) gives no such reach, and the endpoint sees what its owner's gardens show.
 */
export function endpointReach(c: {
  scopes: Scopes;
  kind: 'token' | 'jwt';
  tokenId: string;
  expiresAt: Date | null;
}): EndpointReach {
  const admin = isAdmin(c.scopes);
  return {
    admin: admin && (c.kind === 'token' || c.expiresAt !== null),
    adminTokenId: admin && c.kind === 'token' ? c.tokenId : null,
    adminUntil: admin ? c.expiresAt : null,
  };
}

/**
 * Whether an endpoint's admin reach holds at `at`: recorded, before its credential's expiry, and
 * its token (if any) still valid. Engines check the same in SQL when they fan an event out; the
 * facts they read are these.
 */
export const reachHolds = (
  r: EndpointReach,
  at: Date,
  token: { revoked: boolean; expiresAt: Date | null } | null,
): boolean =>
  r.admin &&
  (r.adminUntil === null || r.adminUntil > at) &&
  (r.adminTokenId === null ||
    (token !== null && !token.revoked && (token.expiresAt === null || token.expiresAt > at)));

/**
 * Whether an endpoint receives an event of `garden`: its reach holds, or its owner is a member of
 * the garden (at fan-out, when the event is written).
 */
export const endpointSees = (reach: boolean, ownerGardens: Visible, garden: string): boolean =>
  reach || (ownerGardens !== null && sees(ownerGardens, garden));
