import type { Actor, GardenRefusal, Role } from '../../access/policy.js';
import type { Change } from './change.js';
import type { NewEvent } from './events.js';

// Gardens and their members.

export interface GardenRecord {
  /** `gdn_` and 24 hex digits. */
  id: string;
  name: string;
  /** The user whose home garden this is; null for every other garden. */
  homeUser: string | null;
  createdAt: Date;
}

export interface MemberRecord {
  user: string;
  role: Role;
  addedAt: Date;
}

/** One garden a user belongs to, and its role there. */
export interface Membership {
  garden: string;
  role: Role;
}

/** A garden write's answer: what it wrote, or why the access policy refused it. */
export type GardenChange<T> = Change<T, GardenRefusal>;

/** A garden to make, with `owner` its maker and first owner. */
export interface NewGarden {
  id: string;
  name: string;
  owner: string;
  at: Date;
}

/** What putMember answers: the member, and whether it was added (not only given a new role). */
export type MemberPut = GardenChange<{ member: MemberRecord; created: boolean }>;

/** The gardens of a store and their members: each write decides by the access policy in its own transaction. */
export interface GardenPort {
  /**
   * The user's home garden; made, with the user as its owner, when it does not exist yet (`make`
   * gives its id, name and time). Any number of processes may ask at once: one garden results.
   */
  homeGarden(user: string, make: { id: string; name: string; at: Date }): Promise<GardenRecord>;
  /** The gardens the user is a member of, with its role in each: its home garden first, then by creation. */
  gardensOf(user: string): Promise<(GardenRecord & { role: Role })[]>;
  /** The user's memberships (one indexed read; every plant request asks it afresh). */
  memberships(user: string): Promise<Membership[]>;
  /** The garden and the role `user` has in it (null user: admin, `owner`); null when missing or no member. */
  gardenFor(id: string, user: string | null): Promise<{ garden: GardenRecord; role: Role } | null>;
  /** Makes a garden with `owner` as its owner; refused when the owner is in too many gardens. */
  createGarden(g: NewGarden): Promise<GardenChange<GardenRecord>>;
  /** Renames a garden the actor owns. */
  renameGarden(id: string, actor: Actor, name: string): Promise<GardenChange<GardenRecord>>;
  /**
   * Deletes a garden the actor owns with no plant in it, with its memberships and its trash (each
   * trashed plant with a plant.purged event caused as `event` is), never a home garden. With
   * `event`, also a member.removed event for each of its members (the role it had), in the same
   * transaction: a change feed learns from them that their plants are gone (contract 13.4).
   */
  deleteGarden(id: string, actor: Actor, event?: NewEvent): Promise<GardenChange<true>>;
  /** The garden's members, by when they were added (the garden's existence is the caller's to check). */
  listMembers(id: string): Promise<MemberRecord[]>;
  /**
   * Adds `user` to a garden the actor owns, or changes its role: atomic with the checks (limits,
   * the last owner, a home garden's own user), whatever else races it. `created`: it was added.
   * With `event`, a member.added or member.changed event (none when the role is the one it had),
   * in the same transaction.
   */
  putMember(
    id: string,
    actor: Actor,
    user: string,
    role: Role,
    at: Date,
    event?: NewEvent,
  ): Promise<MemberPut>;
  /**
   * Removes `user` from the garden: by an owner, or by the user itself (leaving); never the last
   * owner. With `event`, a member.removed event (the role it had), in the same transaction.
   */
  removeMember(id: string, actor: Actor, user: string, event?: NewEvent): Promise<GardenChange<true>>;
  /**
   * The members of each of these gardens, in one statement, as committed when it runs (a garden
   * with no member, or none any more, is left out). The live stream asks it once per batch of events.
   */
  membersOf(gardens: string[]): Promise<Map<string, string[]>>;
}
