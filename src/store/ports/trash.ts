import type { Actor } from '../../access/policy.js';
import type { Change } from './change.js';
import type { GardenJsonPage, NewEvent } from './events.js';
import type { IdempotencyRef } from './idempotency.js';
import type { VersionedPlant } from './plants.js';

// The trash (contract 13.2): deleted plants kept in a table of their own until they are restored
// or purged. Every read of plants reads the plants table only, so a trashed plant is invisible to
// all of them by construction.

/** A plant in its garden's trash: the plant as it was deleted, and when, by whom, until when. */
export interface TrashRecord extends VersionedPlant {
  deletedAt: Date;
  /** The user name of the caller that deleted it. */
  deletedBy: string;
  /** When the service's own purge erases it. */
  purgeAt: Date;
}

/** Where a delete puts the plant: its garden's trash, from `deletedAt` by `deletedBy` until `purgeAt`. */
export interface Trashing {
  deletedAt: Date;
  deletedBy: string;
  purgeAt: Date;
}

/** Where a trash page starts: after the entry deleted at `deletedAt` with this id (newest first). */
export interface TrashPosition {
  deletedAt: Date;
  id: number;
}

/**
 * A page of the trash of `gardens` (null: every garden, an admin), newest deletion first (then the
 * larger id first), after `after` (null: from the newest), at most `limit`: each garden read along
 * its own index and merged, never a scan of every trashed plant.
 */
export interface TrashQuery {
  gardens: string[] | null;
  after: TrashPosition | null;
  limit: number;
}

/**
 * A page of the trash as TrashQuery's, written as its answer's JSON by the engine in one statement
 * with the access facts: `garden` given, that garden's, when `actor` (null: an administrator) may
 * write there (see GardenJsonPage); else every garden where `actor` is an editor or owner when
 * the page is read (an administrator: every garden), `found` true and `role` null. `last` is
 * `<deletedAt ms>.<id>`.
 */
export interface TrashPageQuery {
  garden: string | null;
  actor: Actor;
  after: TrashPosition | null;
  limit: number;
}

/**
 * Why a trash write wrote nothing: `missing` no such entry, or one in a garden the actor is no
 * member of; `forbidden` the actor is only a viewer there; `exists` (restore) a plant has its id now.
 */
export type TrashRefusal = 'missing' | 'forbidden' | 'exists';

export type RestoreResult = Change<VersionedPlant, TrashRefusal>;

export interface TrashPort {
  /** A page of the trash (see TrashQuery). */
  listTrash(q: TrashQuery): Promise<TrashRecord[]>;
  /** As listTrash, per TrashPageQuery (engines where that saves a round trip: PostgreSQL). */
  listTrashJson?(q: TrashPageQuery): Promise<GardenJsonPage>;
  /**
   * Puts the trashed plant back in its garden as it was (same owner, name, tag) with a new version,
   * and with `event` a plant.restored event; with `idem`, records the outcome against the claimed
   * key (a 409 too). The actor (null: admin) must be an editor or owner of its garden (missing
   * before forbidden), and no plant may have its id (exists): checked and done in one transaction,
   * whichever process or instance races it.
   */
  restorePlant(id: number, actor: Actor, idem?: IdempotencyRef, event?: NewEvent): Promise<RestoreResult>;
  /**
   * Erases the trashed plant for good, with `event` a plant.purged event, if the actor is an editor
   * or owner of its garden (missing before forbidden), in one transaction.
   */
  purgeTrashed(id: number, actor: Actor, event?: NewEvent): Promise<Change<true, 'missing' | 'forbidden'>>;
  /**
   * Erases up to `limit` entries whose purgeAt is at or before `now`, oldest first, each with its
   * plant.purged event (at `now`, no actor, no request id), in one transaction; returns how many. On
   * an engine with several writers, a batch runs in one instance at a time and never waits for the
   * rows another has locked.
   */
  purgeExpiredTrash(now: Date, limit: number): Promise<number>;
}
