import type { Actor, Role } from '../../access/policy.js';
import type { Change } from './change.js';

// The event log, webhook endpoints and their deliveries.

/** Why a delivery was ended unsent (an attempt's error), followed by the event's garden. */
export const NOT_SENT_MEMBER = "not sent: the endpoint's owner is no longer a member of garden ";

export const NOT_SENT_ADMIN =
  "not sent: the credential that gave this endpoint every user's events is no longer valid, and its owner is not a member of garden ";

export type PlantEventType =
  | 'plant.created'
  | 'plant.updated'
  | 'plant.deleted'
  /** A plant back from its garden's trash (contract 13.2): data as plant.created's. */
  | 'plant.restored'
  /** A trashed plant erased for good (contract 13.2): data only `{id, garden}`. */
  | 'plant.purged';
/** A garden's membership changes (contract 13.3): events of the garden, as a plant's are. */
export type MemberEventType = 'member.added' | 'member.changed' | 'member.removed';
export type EventType = PlantEventType | MemberEventType;

export const EVENT_TYPES: readonly EventType[] = [
  'plant.created',
  'plant.updated',
  'plant.deleted',
  'plant.restored',
  'plant.purged',
  'member.added',
  'member.changed',
  'member.removed',
];

export const isMemberEvent = (t: EventType): t is MemberEventType => t.startsWith('member.');

/**
 * Who caused an event (contract 13.1): `actor` the user name of the caller whose request made the
 * change, `requestId` that request's X-Request-Id as the service answered it; null for the
 * service's own changes (and for events written before version 5).
 */
export interface EventCause {
  actor: string | null;
  requestId: string | null;
}

/**
 * An event the service decided a change makes; the store writes it in the change's own
 * transaction and gives it its id (`evt_…`, unique; each engine makes them its cheapest way).
 * Without a cause, actor and requestId are null.
 */
export interface NewEvent extends Partial<EventCause> {
  at: Date;
  /**
   * The W3C traceparent of the span that wrote it (traces on, contract 14.1): its webhook
   * deliveries are spans of that trace, whichever process sends them. Never shown to callers.
   */
  traceparent?: string | null;
}

/** What a change replaced: the changed fields' former values (tag null: there was none). */
export interface EventPrevious {
  name?: string;
  tag?: string | null;
}

/**
 * The plant in the original specification's NewPlant shape: tag only when set; for plant.updated,
 * the plant after the change and `previous`.
 */
export interface EventData {
  id: number;
  name: string;
  tag?: string;
  /** The plant's garden (contract version 3). */
  garden: string;
  previous?: EventPrevious;
}

/**
 * A membership change's data: the garden, the member, its role (on member.removed: the role it
 * had), and on member.changed the role it had before.
 */
export interface MemberEventData {
  garden: string;
  user: string;
  role: Role;
  previous?: Role;
}

/** A trashed plant erased for good (plant.purged): its id and garden only. */
export interface PurgedEventData {
  id: number;
  garden: string;
}

/** What any event's data may be. */
export type AnyEventData = EventData | MemberEventData | PurgedEventData;

/**
 * An event's timestamp and data as JSON text, as an engine that keeps its data as JSON text read
 * them for a page of history or activity: the same values as `createdAt.toISOString()` and
 * `JSON.stringify(data)` give, so a page may be sent without parsing the data only to write it
 * again (contract 13.3). Under a symbol key and not enumerable, so records compare as before.
 */
export const EVENT_TEXT: unique symbol = Symbol('plantstore.eventText');
export interface EventText {
  timestamp: string;
  data: string;
}

export interface EventRecord extends EventCause {
  id: string;
  type: EventType;
  /** Who made the plant (a membership change: the member). */
  owner: string;
  /** The plant's garden: its members may see the event (besides plants:admin). */
  garden: string;
  data: AnyEventData;
  createdAt: Date;
  /** Opaque, engine-ordered place in the log; readEvents({after}) gives what follows it. */
  position: string;
  /** The timestamp and data as text, when the engine read them so (history and activity pages). */
  readonly [EVENT_TEXT]?: EventText;
}

/**
 * A page of one plant's history (contract 13.3): the plant events of plant id `plantId` still kept,
 * of the `gardens` given (null: every garden, an admin), newest first, older than `before` (a
 * position of an event of an earlier page; null: from the newest), at most `limit`.
 */
export interface HistoryQuery {
  plantId: number;
  gardens: string[] | null;
  before: string | null;
  limit: number;
}

/**
 * A page of one garden's activity (contract 13.3): its events still kept, plants' and members',
 * of `types` (null: every type), newest first, older than `before`, at most `limit`.
 */
export interface ActivityQuery {
  garden: string;
  types: EventType[] | null;
  before: string | null;
  limit: number;
}

/**
 * A page an engine read already written as its answer's JSON (a JSON array of at most `limit`
 * elements, as the route sends it), read with a limit of `limit + 1`: `rows` says how many rows it
 * read (over `limit`: more follow), `last` the position of its last element when more follow (what
 * the next page's cursor continues after), else null.
 */
export interface JsonPage {
  json: string;
  rows: number;
  last: string | null;
}

/**
 * A page of a garden's page-as-JSON read (activity, the trash of one garden) with the facts its
 * access check needs, read in the same statement: whether the garden exists, and the actor's
 * membership role in it (null: none). The page holds rows only when the actor may read them (the
 * access policy decides again on these facts: the page is sent only then).
 */
export interface GardenJsonPage extends JsonPage {
  found: boolean;
  role: Role | null;
}

/**
 * As HistoryQuery, the gardens being those `actor` is a member of when the page is read (null: an
 * administrator, every garden): the memberships are read in the page's own statement.
 */
export interface HistoryPageQuery {
  plantId: number;
  actor: Actor;
  before: string | null;
  limit: number;
}

/** As ActivityQuery, with the garden's existence and the actor's role read in the same statement. */
export interface ActivityPageQuery extends ActivityQuery {
  actor: Actor;
}

/** What readEvents found, and where the next read starts. */
export interface EventRead {
  events: EventRecord[];
  position: string;
}

export interface EndpointRecord {
  id: string;
  owner: string;
  /**
   * Made with plants:admin: receives every user's events, but only while the credential that made
   * it is valid (adminTokenId not revoked or expired, and before adminUntil); then only its owner's.
   */
  admin: boolean;
  /** The built-in token that gave the endpoint its admin reach; null: none (or a JWT). */
  adminTokenId: string | null;
  /** When the admin reach ends on its own: the credential's expiry (a JWT's `exp`); null: never. */
  adminUntil: Date | null;
  url: string;
  events: EventType[];
  description: string | null;
  secret: string;
  /** The secret before the last rotation, still signing until previousSecretUntil. */
  previousSecret: string | null;
  previousSecretUntil: Date | null;
  status: 'enabled' | 'disabled';
  disabledReason: string | null;
  createdAt: Date;
  lastSuccessAt: Date | null;
  /** When its deliveries began failing with none acknowledged since; null after a success. */
  failingSince: Date | null;
}

export type EndpointPatch = Partial<
  Pick<
    EndpointRecord,
    'secret' | 'previousSecret' | 'previousSecretUntil' | 'status' | 'disabledReason' | 'failingSince'
  >
>;

/**
 * Why an endpoint write wrote nothing: `missing` no such endpoint; `too_many_endpoints` its owner
 * has MAX_ENDPOINTS_PER_USER already.
 */
export type EndpointRefusal = 'missing' | 'too_many_endpoints';

/**
 * One event to one endpoint, leased to one dispatcher: a queued delivery (a retry, a recover, or one
 * queued before deliveries came from the log), or a first attempt taken from the endpoint's log.
 */
export interface DeliveryJob {
  /** The queued delivery's id; null: a first attempt from the endpoint's log. */
  id: string | null;
  /** Attempts made before this one. */
  attempts: number;
  event: EventRecord;
  endpoint: EndpointRecord;
  /** The traceparent the event was written under (NewEvent.traceparent); null or absent: none. */
  traceparent?: string | null;
}

/** What a dispatcher asks renewLeases for: its log leases of these endpoints, extended to `until`. */
export interface LeaseRenewal {
  owner: string;
  endpoints: string[];
  until: Date;
}

/**
 * What a dispatcher asks renewQueuedLeases for: its leases of these queued deliveries
 * (DeliveryJob.id) that have not run out at `now`, extended to `until`.
 */
export interface QueuedLeaseRenewal {
  owner: string;
  deliveries: string[];
  now: Date;
  until: Date;
}

/** What a dispatcher asks claimDeliveries for. */
export interface ClaimQuery {
  now: Date;
  /** How long what is claimed (queued deliveries, and endpoints' log leases) stays the caller's. */
  leaseMs: number;
  leaseOwner: string;
  limit: number;
  /** Most deliveries of one endpoint in this claim (queued and from the log together). */
  perEndpoint: number;
  skipEndpoints: string[];
  /** Deliveries the caller holds already (in flight or waiting), by endpoint owner. */
  ownerLoad?: Record<string, number>;
  /**
   * Endpoints whose log lease the caller holds with events of its window still outstanding, each
   * with the position its window reaches: their log is read on from there, not from `position`.
   */
  windows?: Record<string, string>;
}

/** What claimDeliveries leased to the caller. */
export interface Claim {
  jobs: DeliveryJob[];
  /**
   * For each endpoint whose log lease the caller holds after this claim: how far its window now
   * reaches (the last event taken, or as far as the claim looked when it found fewer than it could take).
   */
  windows: Record<string, string>;
}

/** How far a dispatcher got along an endpoint's log, reported with the attempts that got it there. */
export interface LogProgress {
  endpointId: string;
  leaseOwner: string;
  /** Every matching event of the endpoint's log up to here has been sent or queued for a retry. */
  position: string;
  /** The lease is kept until then (more of the window is outstanding); null: it ends. */
  leaseUntil: Date | null;
}

export type AttemptOutcome = 'succeeded' | 'retrying' | 'failed';

export interface AttemptRecord {
  /** Opaque and increasing: the deliveries log pages by it, newest first. */
  id: string;
  /** The queued delivery's id; null: a first attempt from the endpoint's log. */
  deliveryId: string | null;
  endpointId: string;
  eventId: string;
  eventType: EventType;
  /** 1 for the first attempt. */
  attempt: number;
  at: Date;
  /** The receiver's HTTP status, or null when none came (refused, unreachable, timed out). */
  status: number | null;
  outcome: AttemptOutcome;
  error: string | null;
  durationMs: number;
  nextAttemptAt: Date | null;
}

export interface FinishedAttempt {
  /** The queued delivery's id; null: a first attempt from the endpoint's log. */
  deliveryId: string | null;
  leaseOwner: string;
  attempt: Omit<AttemptRecord, 'id'>;
  /** Disable the endpoint, with this reason (410 Gone, or five days of failures). */
  disableEndpoint: string | null;
}

/**
 * The event log of a store, and the webhook endpoints that follow it: each endpoint's progress is a
 * position in the log (with a lease for the dispatcher sending what follows it), plus the queued
 * deliveries of the events that wait for a retry.
 */
export interface EventPort {
  /**
   * Stores a new endpoint, unless its owner has MAX_ENDPOINTS_PER_USER already, counted so that
   * racing inserts, on any number of instances, never pass the limit together. Its position is
   * the log's head: it gets the events written after it was made.
   */
  insertEndpoint(endpoint: EndpointRecord): Promise<Change<true, 'too_many_endpoints'>>;
  /** Every endpoint of `owner`, oldest first; null: everyone's. */
  listEndpoints(owner: string | null): Promise<EndpointRecord[]>;
  getEndpoint(id: string): Promise<EndpointRecord | null>;
  /** Changes an endpoint; answers it as changed. One enabled again goes on from the log's head. */
  updateEndpoint(id: string, patch: EndpointPatch): Promise<Change<EndpointRecord, 'missing'>>;
  /** Deletes an endpoint with its deliveries and their log. */
  deleteEndpoint(id: string): Promise<Change<true, 'missing'>>;
  /**
   * Leases up to `limit` deliveries to `leaseOwner` for `leaseMs`, skipping disabled endpoints and
   * those in `skipEndpoints`, at most `perEndpoint` of one endpoint. First the queued deliveries
   * that are due (or whose lease ran out), as fair between users and their endpoints as the claim
   * can make it: each endpoint's own come in the order they fell due, and the owners take turns, the
   * owner with the least `ownerLoad` (deliveries the caller holds already) first, so no user's
   * backlog holds back another's. A queued delivery whose endpoint may no longer see its event (its
   * owner is not a member of the event's garden, and it has no admin reach now) is not sent: the
   * claim ends it as failed, logging an attempt with no status and the reason, and does not return it.
   *
   * Then, up to `limit`, first attempts from the log: for each endpoint whose log lease is free,
   * ran out, or is the caller's, the events after its window (`windows`) or else its position, of
   * its types, that it may see now (admin reach now; else its owner a member of the event's garden
   * now and since the event was written: others are passed over, logging nothing). Taking any leases
   * the endpoint's log to the caller until now + leaseMs, and reports how far the window reaches in
   * `windows`; finding none moves a free endpoint's position on to as far as the claim looked. Any
   * number of processes may call this at once; while a lease holds, each queued delivery and each
   * event of an endpoint's log goes to one of them.
   */
  claimDeliveries(q: ClaimQuery): Promise<Claim>;
  /**
   * In one write: logs each attempt; reschedules (nextAttemptAt) or ends its queued delivery if it
   * is still leased to the caller (an attempt whose lease was lost is logged, and its delivery is
   * left as it is); queues a first attempt from the log that is to be retried as a delivery (made
   * once, due at nextAttemptAt) if the caller still holds that endpoint's log lease (if not, whoever
   * took the lease sends it again from the log); records each endpoint's success or failure, or
   * disables it; then moves each endpoint of `progress` on to its position and keeps or ends its
   * lease, where the lease is still the caller's.
   */
  finishDeliveries(f: FinishedAttempt[], progress?: LogProgress[]): Promise<void>;
  /**
   * Extends to `until` (never shortens) the log lease of each endpoint of `endpoints` that is still
   * `owner`'s, whether or not it has run out: no other claim has taken it. Answers the endpoints
   * whose lease was extended; the others' leases are no longer the owner's.
   */
  renewLeases(q: LeaseRenewal): Promise<string[]>;
  /**
   * The same for queued deliveries (retries), but only leases that have not run out at `now`: a
   * queued delivery whose lease has run out may be claimed again by anyone, its owner too (as a
   * job of its own). Extends to `until` (never shortens) the lease of each of `deliveries` still
   * pending, still `owner`'s and running after `now`. Answers the deliveries whose lease was
   * extended.
   */
  renewQueuedLeases(q: QueuedLeaseRenewal): Promise<string[]>;
  /** An endpoint's attempts, newest first, older than `beforeId` when given. */
  listAttempts(endpointId: string, q: { limit: number; beforeId: string | null }): Promise<AttemptRecord[]>;
  /**
   * Queues again every event since `since` that matches the endpoint, that it may see now (its
   * owner a member of the event's garden since the event, or the endpoint's admin reach still
   * valid at `now`), that lies at or before the endpoint's position (later ones come from its log
   * anyway), that it has not acknowledged (no succeeded attempt) and that is not already queued;
   * returns how many.
   */
  recoverDeliveries(endpointId: string, since: Date, now: Date): Promise<number>;
  /** Where the event with this id stands in the log; null when it is not (or no longer) kept. */
  eventPosition(id: string): Promise<string | null>;
  /** The position after which events not yet in the log will come. */
  headPosition(): Promise<string>;
  /**
   * Up to `limit` events after `after`, in log order, of the `gardens` given (null: everyone's). On
   * an engine with concurrent writers, only events whose every predecessor has committed are
   * returned, so that a reader never passes over one that commits late. With them, the position
   * from which the next read goes on: the last event's when `limit` were found, else as far as the
   * read looked (the log's committed head), so that a reader whose gardens are quiet does not look
   * at the same stretch of others' events again.
   */
  readEvents(q: { after: string; gardens: string[] | null; limit: number }): Promise<EventRead>;
  /**
   * A page of a plant's history, read along an index of the plant's events by position (a page
   * costs what it holds, not what the log holds).
   */
  plantHistory(q: HistoryQuery): Promise<EventRecord[]>;
  /** A page of a garden's activity, read along an index of the garden's events by position. */
  gardenActivity(q: ActivityQuery): Promise<EventRecord[]>;
  /**
   * As plantHistory, the memberships read and the page written as its JSON by the engine in one
   * statement (engines where that saves a round trip and the rows' parsing: PostgreSQL).
   */
  plantHistoryJson?(q: HistoryPageQuery): Promise<JsonPage>;
  /** As gardenActivity, in one statement with the garden's access facts (see GardenJsonPage). */
  gardenActivityJson?(q: ActivityPageQuery): Promise<GardenJsonPage>;
  /** Log order of two positions of this store: negative when `a` comes before `b`, 0 when equal. */
  comparePositions(a: string, b: string): number;
  /**
   * Calls `listener` whenever events may have been added to the log: at once after each commit of
   * this process that wrote events (or queued deliveries: recover), and soon after other
   * processes' commits (PostgreSQL: a NOTIFY the writing process sends after its commit; SQLite:
   * the log's head, looked at every 100 ms while anyone listens). A call promises nothing new: the
   * listener reads the log to find out. A listener still polls slowly of its own as a safety net (a
   * process that dies between its commit and its NOTIFY). Returns a function that unsubscribes.
   */
  onEvents(listener: () => void): () => void;
  /** Deletes events, finished deliveries and attempts older than `before`; returns how many events. */
  purgeEvents(before: Date): Promise<number>;
}
