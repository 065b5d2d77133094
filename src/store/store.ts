import type { Actor, GardenRefusal, Role, Scope } from '../access/policy.js';

// The access policy's words, as the engines and services read them from the store's own module.
export {
  type Actor,
  type GardenRefusal,
  MAX_ENDPOINTS_PER_USER,
  MAX_GARDENS_CREATED,
  MAX_MEMBERS_PER_GARDEN,
  MAX_MEMBERSHIPS_PER_USER,
  type Role,
} from '../access/policy.js';

/** A plant as the store keeps it. `tag` is null when absent; `owner` is who created it. */
export interface PlantRecord {
  id: number;
  owner: string;
  /** The garden it belongs to (never changes): its members decide who sees and changes it. */
  garden: string;
  name: string;
  tag: string | null;
}

/** A plant as a list page shows it (its creator is not read). */
export interface PagePlant {
  id: number;
  garden: string;
  name: string;
  tag: string | null;
  version?: number;
}

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

/** Why a delivery was ended unsent (an attempt's error), followed by the event's garden. */
export const NOT_SENT_MEMBER = "not sent: the endpoint's owner is no longer a member of garden ";
export const NOT_SENT_ADMIN =
  "not sent: the credential that gave this endpoint every user's events is no longer valid, and its owner is not a member of garden ";
export type GardenChange<T> = { ok: T } | { refused: GardenRefusal };

/** A garden write's refusal, as every engine answers it. */
export const refused = <R extends GardenRefusal>(why: R): { refused: R } => ({ refused: why });

/**
 * A plant with its version: a positive integer the store gives it at its creation and anew at each
 * change, never given twice in a store (so a plant re-created under a deleted plant's id never
 * repeats a version, and an ETag made from it never repeats either).
 */
export interface VersionedPlant extends PlantRecord {
  version: number;
}

/** A JSON Merge Patch of a plant, checked: a field present is to be set (tag null: removed). */
export interface PlantPatch {
  name?: string;
  tag?: string | null;
}

export type UpdateResult =
  /** Applied; `changed` is false for a patch that changed nothing (no new version, no event). */
  | { updated: VersionedPlant; changed: boolean }
  /** No such plant, or one the actor may not see. */
  | { missing: true }
  /** The actor sees the plant but is only a viewer of its garden: nothing changed. */
  | { forbidden: true }
  /** The plant's version is none of `ifVersions`: nothing changed. */
  | { mismatch: VersionedPlant };

export interface NewPlant {
  /** null: the store assigns the next id. */
  id: number | null;
  owner: string;
  /** The garden it goes into. */
  garden: string;
  /** Made by plants:admin: no role in the garden is needed (otherwise owner must be its editor or owner). */
  admin?: boolean;
  name: string;
  tag: string | null;
}

export interface PageQuery {
  /**
   * The gardens whose plants to list, as one page in id order across them all (each garden read
   * along its own index and merged, never a scan of every visible row); null: every plant (admin).
   */
  gardens: string[] | null;
  tag: string | null;
  /** Return ids strictly greater than this. */
  afterId: number;
  limit: number;
  /** Also each plant's version (read in the same snapshot as the page). */
  withVersion?: boolean;
}

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

export interface IdempotencyRef {
  user: string;
  key: string;
}

/** What a finished idempotent create or change produced, enough to replay it. */
export interface IdempotencyOutcome {
  status: number;
  plantId: number | null;
  /** For a change: the plant as its 200 showed it. */
  plant?: { name: string; tag: string | null; version: number };
}

export type IdempotencyClaim =
  | { state: 'claimed' }
  | { state: 'in_flight' }
  | { state: 'mismatch' }
  | { state: 'done'; outcome: IdempotencyOutcome };

/** Connections a pooled engine holds. */
export interface PoolStats {
  size: number;
  idle: number;
  waiting: number;
}

export type CreateResult =
  | { created: VersionedPlant }
  | { exists: true }
  /** The garden does not exist or the owner is no member of it (checked in the create's transaction). */
  | { missing: true }
  /** The owner is only a viewer of the garden. */
  | { forbidden: true };

export type EventType = 'plant.created' | 'plant.updated' | 'plant.deleted';
export const EVENT_TYPES: readonly EventType[] = ['plant.created', 'plant.updated', 'plant.deleted'];

/**
 * An event the service decided a change makes; the store writes it in the change's own
 * transaction and gives it its id (`evt_…`, unique; each engine makes them its cheapest way).
 */
export interface NewEvent {
  at: Date;
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

export interface EventRecord {
  id: string;
  type: EventType;
  /** Who made the plant. */
  owner: string;
  /** The plant's garden: its members may see the event (besides plants:admin). */
  garden: string;
  data: EventData;
  createdAt: Date;
  /** Opaque, engine-ordered place in the log; readEvents({after}) gives what follows it. */
  position: string;
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

/** One event to one endpoint, leased to one dispatcher until it reports back or the lease runs out. */
export interface DeliveryJob {
  id: string;
  /** Attempts made before this one. */
  attempts: number;
  event: EventRecord;
  endpoint: EndpointRecord;
}

export type AttemptOutcome = 'succeeded' | 'retrying' | 'failed';

export interface AttemptRecord {
  /** Opaque and increasing: the deliveries log pages by it, newest first. */
  id: string;
  deliveryId: string;
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
  deliveryId: string;
  leaseOwner: string;
  attempt: Omit<AttemptRecord, 'id'>;
  /** Disable the endpoint, with this reason (410 Gone, or five days of failures). */
  disableEndpoint: string | null;
}

/**
 * Everything the service needs from persistence, in domain terms. Every engine implements it
 * and passes the same contract tests (test/store). A resolved write is durable.
 */
/**
 * A page of a list stays exact while `reorder` is unchanged, and a last page also while `top` is:
 * `reorder` moves when a plant in the scope is deleted or changed, or created with an id that may
 * land below the newest (a client-chosen id; on PostgreSQL also a server-assigned one committed
 * after a larger one), and whenever the engine cannot tell what another writer changed; `top`
 * moves when one with the tag is created after every other (which only the last page can show).
 * Only equality means anything: the values are not counts (PostgreSQL gives strings for a scope
 * of several gardens).
 */
export interface ListMarks {
  reorder: number | string;
  top: number | string;
}

export interface Store {
  readonly engine: string;
  /** Applies pending migrations; returns the names applied now. */
  migrate(): Promise<string[]>;
  /**
   * Inserts a plant; with `idem`, records the outcome against the claimed key, and with `event`, a
   * plant.created event and its deliveries to every matching enabled endpoint — all in one transaction.
   */
  createPlant(plant: NewPlant, idem?: IdempotencyRef, event?: NewEvent): Promise<CreateResult>;
  /** The plant with this id, whoever's garden it is in. */
  getPlant(id: number): Promise<VersionedPlant | null>;
  /**
   * The plant with this id and the role `user` has in its garden (null user: admin, `owner`), or
   * null when there is none or the user is no member of its garden: one read, by primary keys only.
   */
  plantFor(id: number, user: string | null): Promise<{ plant: VersionedPlant; role: Role } | null>;
  /** Up to `limit` plants with id > afterId, ascending, in the gardens and with the tag asked (with versions if asked). */
  listPlants(q: PageQuery): Promise<PagePlant[]>;
  /**
   * Changes the plant if it exists, the actor (non-null) is an editor or owner of its garden and
   * (ifVersions non-null) it has one of those versions: the check and the change are one atomic
   * step, whichever process or instance races it (missing before forbidden before mismatch). A change takes a new version; with `idem`, the outcome is recorded against
   * the claimed key; with `event`, a plant.updated event (with `previous`) and its deliveries — all
   * in one transaction. A patch that changes nothing writes nothing but the key's outcome.
   */
  updatePlant(
    id: number,
    actor: Actor,
    patch: PlantPatch,
    ifVersions: number[] | null,
    idem?: IdempotencyRef,
    event?: NewEvent,
  ): Promise<UpdateResult>;
  /**
   * Deletes the plant if it exists, the actor (non-null) is an editor or owner of its garden and
   * (ifVersions non-null) it has one of those versions; with `event`, as createPlant. false: no
   * such plant or not visible to the actor; 'forbidden': the actor is a viewer; 'mismatch' (only
   * with ifVersions): in another version. Only `true` deleted anything.
   */
  deletePlant(
    id: number,
    actor: Actor,
    event?: NewEvent,
    ifVersions?: number[] | null,
  ): Promise<boolean | 'mismatch' | 'forbidden'>;

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
  createGarden(g: { id: string; name: string; owner: string; at: Date }): Promise<GardenChange<GardenRecord>>;
  /** Renames a garden the actor owns. */
  renameGarden(id: string, actor: Actor, name: string): Promise<GardenChange<GardenRecord>>;
  /** Deletes an empty garden the actor owns, with its memberships (never a home garden). */
  deleteGarden(id: string, actor: Actor): Promise<GardenChange<true>>;
  /** The garden's members, by when they were added (the garden's existence is the caller's to check). */
  listMembers(id: string): Promise<MemberRecord[]>;
  /**
   * Adds `user` to a garden the actor owns, or changes its role: atomic with the checks (limits,
   * the last owner, a home garden's own user), whatever else races it. `created`: it was added.
   */
  putMember(
    id: string,
    actor: Actor,
    user: string,
    role: Role,
    at: Date,
  ): Promise<GardenChange<{ member: MemberRecord; created: boolean }>>;
  /** Removes `user` from the garden: by an owner, or by the user itself (leaving); never the last owner. */
  removeMember(id: string, actor: Actor, user: string): Promise<GardenChange<true>>;

  /**
   * Stores a new endpoint, unless its owner has MAX_ENDPOINTS_PER_USER already (false), counted so
   * that racing inserts, on any number of instances, never pass the limit together.
   */
  insertEndpoint(endpoint: EndpointRecord): Promise<boolean>;
  /** Every endpoint of `owner`, oldest first; null: everyone's. */
  listEndpoints(owner: string | null): Promise<EndpointRecord[]>;
  getEndpoint(id: string): Promise<EndpointRecord | null>;
  /** Changes an endpoint; null when there is no such endpoint. */
  updateEndpoint(id: string, patch: EndpointPatch): Promise<EndpointRecord | null>;
  /** Deletes an endpoint with its deliveries and their log. */
  deleteEndpoint(id: string): Promise<boolean>;

  /**
   * Leases up to `limit` deliveries that are due (or whose lease ran out) to `leaseOwner` for
   * `leaseMs`, skipping disabled endpoints and those in `skipEndpoints`. Any number of processes
   * may call this at once; each delivery goes to one of them. The claim is fair between users and
   * their endpoints: each endpoint's own deliveries come in the order they fell due, and the owners
   * take turns, the owner with the least `ownerLoad` (deliveries the caller holds already) first,
   * so no user's backlog holds back another's. A delivery whose endpoint may no longer see its event
   * (its owner is not a member of the event's garden, and it has no admin reach now) is not sent:
   * the claim ends it as failed, logging an attempt with no status and the reason, and does not
   * return it.
   */
  claimDeliveries(q: {
    now: Date;
    leaseMs: number;
    leaseOwner: string;
    limit: number;
    /** Most deliveries of one endpoint in this claim. */
    perEndpoint: number;
    skipEndpoints: string[];
    /** Deliveries the caller holds already (in flight or waiting), by endpoint owner. */
    ownerLoad?: Record<string, number>;
  }): Promise<DeliveryJob[]>;
  /**
   * Logs each attempt and reschedules (nextAttemptAt) or ends its delivery, all in one write; an
   * attempt whose lease was lost is logged, and its delivery is left as it is.
   */
  finishDeliveries(f: FinishedAttempt[]): Promise<void>;
  /** An endpoint's attempts, newest first, older than `beforeId` when given. */
  listAttempts(endpointId: string, q: { limit: number; beforeId: string | null }): Promise<AttemptRecord[]>;
  /**
   * Queues again every event since `since` that matches the endpoint, that it may see now (its
   * owner a member of the event's garden since the event, or the endpoint's admin reach still
   * valid at `now`) and that it has not acknowledged (and is not
   * already queued); returns how many.
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
   * Calls `listener` after each commit of this process that queued webhook deliveries (a change
   * with an event that some endpoint wants, or a recover), so that its dispatcher looks at once.
   */
  onDeliveriesQueued(listener: () => void): void;
  /** Deletes events, finished deliveries and attempts older than `before`; returns how many events. */
  purgeEvents(before: Date): Promise<number>;

  /** Claims an Idempotency-Key for a request whose body hashes to requestHash. */
  claimIdempotencyKey(
    ref: IdempotencyRef,
    requestHash: string,
    opts: { now: Date; staleAfterMs: number; retainMs: number },
  ): Promise<IdempotencyClaim>;
  /** Forgets a claimed key whose request failed unexpectedly, so it can be retried. */
  releaseIdempotencyKey(ref: IdempotencyRef): Promise<void>;
  /** Deletes idempotency records created before the given time; returns how many. */
  purgeIdempotencyKeys(before: Date): Promise<number>;

  insertToken(token: TokenRecord): Promise<void>;
  findTokenByHash(hash: string): Promise<TokenRecord | null>;
  findToken(id: string): Promise<TokenRecord | null>;
  /** Tokens newest first (in the order they were made, not by createdAt alone), a keyset page at a time. */
  pageTokens(q: TokenPageQuery): Promise<TokenRecord[]>;
  /** Marks a token revoked; false when no such token or already revoked. */
  revokeToken(id: string, at: Date): Promise<boolean>;
  /**
   * Sets lastUsedAt to `minute` on those of `ids` whose lastUsedAt is earlier or unset, in one
   * statement; returns how many rows changed. However many processes call it, a token's row is
   * written at most once per minute.
   */
  touchTokens(ids: string[], minute: Date): Promise<number>;

  /**
   * What a cached list page of the plants of `gardens` (null: everyone's) with `tag` (null: any)
   * depends on, as of the moment it is read, whichever process wrote; null when the engine keeps
   * none for that scope (PostgreSQL: everyone's plants). Engines that cannot know every write omit
   * it, and their list pages are never cached.
   */
  listMarks?(gardens: string[] | null, tag: string | null): Promise<ListMarks | null>;
  /**
   * The user's memberships (as `memberships`) and the marks of the list of all their gardens'
   * plants with `tag`, read together (engines whose marks live in the database: one round trip).
   */
  scopeMarks?(user: string, tag: string | null): Promise<{ memberships: Membership[]; marks: ListMarks }>;
  /** Writes a consistent copy of the whole store to a new file, online (embedded engines only). */
  backup?(file: string): Promise<void>;
  /** Connection pool use, for engines that pool. */
  poolStats?(): PoolStats;
  /** Resolves when the store answers a trivial query. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
