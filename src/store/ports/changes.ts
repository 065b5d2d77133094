import type { EventRecord, EventType } from './events.js';
import type { PagePlant } from './plants.js';

// What the change feed (contract 13.4) reads besides the log and the plant list: the caller's own
// membership changes, how far the log has been purged, and the plants a feed answer names.

/** What a feed answer reads before anything else (ChangePort.feedStart). */
export interface FeedStart {
  /** The log's head (as Store.headPosition). */
  head: string;
  /** As purgedUpTo. */
  purgedUpTo: string;
  /** The user's gardens (as memberships), by id; null when no user was named. */
  gardens: string[] | null;
  /** The gardens the user joined or left after `since` (as memberEventGardens); none without a user. */
  moved: string[];
  /**
   * Asked for with `log` (and read where the engine can): feedLog after `since` with `log.limit`,
   * in the gardens a feed answer reads (`log.garden` alone when named, else `gardens` and `moved`),
   * with `tailAfter` the head and `log.tailLimit`, read with the rest (on PostgreSQL: the same
   * statement, so the same snapshot). Absent: not read.
   */
  log?: FeedLogRead;
}

/** What feedStart may read of the log besides (FeedStart.log). */
export interface FeedStartLog {
  limit: number;
  tailLimit: number;
  garden: string | null;
}

/** An event as the change feed reads it: where it is, what it is, and the plant it names (plant events). */
export interface FeedEvent {
  position: string;
  type: EventType;
  owner: string;
  garden: string;
  plant: number | null;
}

/** What ChangePort.feedLog read. */
export interface FeedLogRead {
  /** As readEvents: the events, and where a reader goes on from. */
  events: FeedEvent[];
  position: string;
  /** When `events` fell short of the limit: committedEvents after `tailAfter` (null: not read). */
  committed: FeedEvent[] | null;
  /** The plants that exist now among those `events` and `committed` name, as plantsByIds. */
  plants: PagePlant[];
}

/**
 * The reads of the change feed. Each costs what it returns (or, for deletedPlantIds, the garden's
 * events since the position), never what the log holds.
 */
export interface ChangePort {
  /**
   * A position at or after every event purged so far: a feed position before it may have lost
   * events (410 changes_expired). Before any purge, a position before every event.
   */
  purgedUpTo(): Promise<string>;
  /**
   * The head, purgedUpTo, and for `user` (null: none) its gardens and memberEventGardens after
   * `since` (null: after the head), read together where the engine can (one statement on
   * PostgreSQL), with the head read no later than the rest. With `log` (a user and a `since` only),
   * also the log's first read (FeedStart.log), where the engine can. Optional: without it the feed
   * reads them one by one.
   */
  feedStart?(user: string | null, since: string | null, log?: FeedStartLog): Promise<FeedStart>;
  /**
   * The gardens in which `user` was added or removed (member.added, member.removed) after
   * `after`, each once: read along an index of those events by member and position.
   */
  memberEventGardens(user: string, after: string): Promise<string[]>;
  /**
   * Up to `limit` committed events after `after` of the `gardens` (null: every garden), in log
   * order. Unlike readEvents, on an engine with concurrent writers this includes events whose
   * predecessors may still commit: what they name may be answered, but no position may go past them.
   */
  committedEvents(q: { after: string; gardens: string[] | null; limit: number }): Promise<EventRecord[]>;
  /**
   * readEvents, committedEvents after `tailAfter` (`tailLimit` at most) when the events fall short
   * of `limit`, and the plants those events name, read together (one statement on PostgreSQL, so
   * one snapshot). Optional: without it the feed reads them one by one.
   */
  feedLog?(q: {
    after: string;
    gardens: string[] | null;
    limit: number;
    tailAfter: string;
    tailLimit: number;
  }): Promise<FeedLogRead>;
  /**
   * The ids of the plants of `garden` deleted (plant.deleted) after position `after`, greater than
   * `afterId`, ascending, each once, at most `limit`.
   */
  deletedPlantIds(q: { garden: string; after: string; afterId: number; limit: number }): Promise<number[]>;
  /** The plants among `ids` that exist now, with their versions, in id order. */
  plantsByIds(ids: number[]): Promise<PagePlant[]>;
}
