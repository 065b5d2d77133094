import { randomBytes } from 'node:crypto';
import { type Action, actorOf, allows, leastRole, MAKER_ROLE, roleOf } from '../access/policy.js';
import { AppError, ConflictError, GardenNotFoundError, InsufficientRoleError } from '../errors.js';
import { type Caller, isAdmin } from '../identity/caller.js';
import type {
  GardenChange,
  GardenRecord,
  GardenRefusal,
  ListMarks,
  MemberRecord,
  Membership,
  Role,
  Store,
} from '../store/store.js';
import { currentTraceparent } from '../telemetry/tracing.js';
import { gardenId, isGardenId } from './id.js';

/** A garden as the caller sees it (contract 3.2). */
export interface GardenView {
  garden: GardenRecord;
  /** The caller's own role (`owner` for an admin who is not a member). */
  role: Role;
  /** True only for the user whose home garden it is. */
  home: boolean;
}

export const HOME_GARDEN_NAME = 'Home';
// An id that cannot name a garden never reaches the store: 404, as one that does not exist.
const checked = (id: string): string => {
  if (!isGardenId(id)) throw new GardenNotFoundError();
  return id;
};
// Past this many users' home garden ids kept, the oldest is forgotten (it is read again when needed).
const HOME_CACHE = 100_000;

/** The 403 of a caller whose role is too weak for `action` (its message names the least role). */
export const forbidden = (action: Exclude<Action, 'read'>): AppError =>
  new InsufficientRoleError(leastRole(action) as 'editor' | 'owner');

/** What each refusal of a garden write answers. */
function refusal(why: GardenRefusal): AppError {
  switch (why) {
    case 'missing':
      return new GardenNotFoundError();
    case 'forbidden':
      return forbidden('manage');
    case 'no_member':
      return new AppError(404, 'member_not_found', 'that user is not a member of this garden');
    case 'home_garden':
      return new ConflictError(
        'home_garden',
        "a home garden cannot be deleted, and its user's own membership cannot be changed or removed",
      );
    case 'last_owner':
      return new ConflictError('last_owner', 'a garden must keep at least one owner');
    case 'too_many_gardens':
      return new ConflictError(
        'too_many_gardens',
        'a user may make at most 100 gardens (its home garden included) and belong to at most 1,000',
      );
    case 'too_many_members':
      return new ConflictError('too_many_members', 'a garden may have at most 1,000 members');
    case 'garden_not_empty':
      return new ConflictError(
        'garden_not_empty',
        'this garden still has plants: delete them first (plants in its trash go with it)',
      );
  }
}

const ok = <T>(r: GardenChange<T>): T => {
  if ('refused' in r) throw refusal(r.refused);
  return r.ok;
};

/** The garden rules: home gardens, roles, members. No HTTP, no SQL (the store checks atomically). */
export class GardenService {
  private readonly homes = new Map<string, string>();

  constructor(
    private readonly store: Store,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** The id of the user's home garden, made when first needed; a home garden never changes, so it is kept. */
  async homeOf(user: string): Promise<string> {
    const known = this.homes.get(user);
    if (known !== undefined) return known;
    const home = await this.store.homeGarden(user, {
      id: gardenId(randomBytes),
      name: HOME_GARDEN_NAME,
      at: this.now(),
    });
    if (this.homes.size >= HOME_CACHE) this.homes.delete(this.homes.keys().next().value!);
    this.homes.set(user, home.id);
    return home.id;
  }

  /**
   * The gardens whose plants and events the caller sees, read afresh (so a removed member sees
   * nothing more on the very next request, on every instance); null: every garden (admin).
   */
  async visible(caller: Caller): Promise<string[] | null> {
    if (isAdmin(caller)) return null;
    return this.gardensOf(await this.store.memberships(caller.user));
  }

  /**
   * As visible, with the marks of the list of those gardens' plants with `tag` when the engine
   * reads them together with the memberships (one round trip); an administrator's come without.
   */
  async visibleWithMarks(
    caller: Caller,
    tag: string | null,
  ): Promise<{ gardens: string[] | null; marks?: ListMarks }> {
    if (isAdmin(caller) || !this.store.scopeMarks) return { gardens: await this.visible(caller) };
    const { memberships, marks } = await this.store.scopeMarks(caller.user, tag);
    return { gardens: this.gardensOf(memberships), marks };
  }

  // An engine that keeps memberships answers the same array while they stand: so is the list of
  // their gardens, and what is built from it (a list cache key) can be kept with it.
  private gardensOf(memberships: Membership[]): string[] {
    let gardens = this.gardenIds.get(memberships);
    if (gardens === undefined) {
      gardens = memberships.map((m) => m.garden);
      this.gardenIds.set(memberships, gardens);
    }
    return gardens;
  }

  private readonly gardenIds = new WeakMap<Membership[], string[]>();

  /** The garden and the caller's role in it; 404 when it does not exist or the caller is no member. */
  async find(caller: Caller, id: string): Promise<GardenView> {
    const found = await this.store.gardenFor(checked(id), actorOf(caller));
    if (found === null) throw new GardenNotFoundError();
    return { ...found, home: found.garden.homeUser === caller.user };
  }

  /**
   * As find, on facts a store read together with something else (one round trip): the garden `id`
   * exists (`found`) and the caller's membership role in it (null: none). The caller's role;
   * 404 when the garden does not exist or the caller is no member. `checkedId` first: an id that
   * cannot name a garden never reaches the store.
   */
  roleFrom(caller: Caller, facts: { found: boolean; role: Role | null }): Role {
    const role = facts.found ? roleOf(actorOf(caller), facts.role) : null;
    if (role === null) throw new GardenNotFoundError();
    return role;
  }

  /** A garden id as find takes it; 404 when it cannot name a garden. */
  checkedId(id: string): string {
    return checked(id);
  }

  /** As find, and 403 insufficient_role unless the caller's role allows `action`. */
  async require(caller: Caller, id: string, action: Exclude<Action, 'read'>): Promise<GardenView> {
    const view = await this.find(caller, id);
    if (!allows(view.role, action)) throw forbidden(action);
    return view;
  }

  /** The caller's gardens: its home garden first (made when first needed), then by creation. */
  async list(caller: Caller): Promise<GardenView[]> {
    await this.homeOf(caller.user);
    const gardens = await this.store.gardensOf(caller.user);
    return gardens.map(({ role, ...garden }) => ({ garden, role, home: garden.homeUser === caller.user }));
  }

  /** A new garden with the caller as its owner. */
  async create(caller: Caller, name: string): Promise<GardenView> {
    // Its home garden first, so that it counts towards the caller's gardens like every other.
    await this.homeOf(caller.user);
    const garden = ok(
      await this.store.createGarden({ id: gardenId(randomBytes), name, owner: caller.user, at: this.now() }),
    );
    return { garden, role: MAKER_ROLE, home: false };
  }

  async rename(caller: Caller, id: string, name: string): Promise<GardenView> {
    // Only a caller that may manage the garden gets this far: an owner, or an admin acting as one.
    const garden = ok(await this.store.renameGarden(checked(id), actorOf(caller), name));
    return { garden, role: leastRole('manage'), home: garden.homeUser === caller.user };
  }

  /**
   * Deletes a garden with no live plant; its trash goes with it (a plant.purged event each), and
   * each member is told it was removed (member.removed).
   */
  async remove(caller: Caller, id: string, requestId: string | null = null): Promise<void> {
    const event = { at: this.now(), actor: caller.user, requestId, traceparent: currentTraceparent() };
    ok(await this.store.deleteGarden(checked(id), actorOf(caller), event));
  }

  /**
   * The gardens whose trash the caller sees: those where it is an editor or owner, read afresh;
   * null: every garden (admin).
   */
  async writable(caller: Caller): Promise<string[] | null> {
    if (isAdmin(caller)) return null;
    const memberships = await this.store.memberships(caller.user);
    return memberships.flatMap((m) => (allows(m.role, 'write') ? [m.garden] : []));
  }

  /** The garden's members, to any member (404 otherwise). */
  async members(caller: Caller, id: string): Promise<MemberRecord[]> {
    await this.find(caller, id);
    return this.store.listMembers(id);
  }

  /** Adds a member or changes its role (owners only). */
  async share(
    caller: Caller,
    id: string,
    user: string,
    role: Role,
    requestId: string | null = null,
  ): Promise<{ member: MemberRecord; created: boolean }> {
    const at = this.now();
    // The event's time is the membership's: a new member's endpoints get its member.added.
    const event = { at, actor: caller.user, requestId };
    return ok(await this.store.putMember(checked(id), actorOf(caller), user, role, at, event));
  }

  /** Removes a member (owners), or the caller itself (leaving); the garden's members are told (member.removed). */
  async unshare(caller: Caller, id: string, user: string, requestId: string | null = null): Promise<void> {
    const event = { at: this.now(), actor: caller.user, requestId, traceparent: currentTraceparent() };
    ok(await this.store.removeMember(checked(id), actorOf(caller), user, event));
  }
}
