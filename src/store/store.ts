import type { Scope } from '../schemas/token.js';

/** A plant as the store keeps it. `tag` is null when absent. */
export interface PlantRecord {
  id: number;
  owner: string;
  name: string;
  tag: string | null;
}

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
  /** No such plant, or not one of `owner`'s. */
  | { missing: true }
  /** The plant's version is none of `ifVersions`: nothing changed. */
  | { mismatch: VersionedPlant };

export interface NewPlant {
  /** null: the store assigns the next id. */
  id: number | null;
  owner: string;
  name: string;
  tag: string | null;
}

export interface PageQuery {
  /** null: every owner (admin view). */
  owner: string | null;
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

export type CreateResult = { created: VersionedPlant } | { exists: true };

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
  previous?: EventPrevious;
}

export interface EventRecord {
  id: string;
  type: EventType;
  /** Whose plant it was: who may see the event (besides plants:admin). */
  owner: string;
  data: EventData;
  createdAt: Date;
  /** Opaque, engine-ordered place in the log; listEvents({after}) gives what follows it. */
  position: string;
}

export interface EndpointRecord {
  id: string;
  owner: string;
  /** Made with plants:admin: receives every user's events. */
  admin: boolean;
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
 * `reorder` moves when a plant in the scope is deleted or created with a client-chosen id (which
 * may land below the newest), and whenever the engine cannot tell what another writer changed;
 * `top` moves when one with the tag is created with a server-assigned id, after every other (which
 * only the last page can show). Only equality means anything: the values are not counts.
 */
export interface ListMarks {
  reorder: number;
  top: number;
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
  /** The plant with this id, whoever owns it. */
  getPlant(id: number): Promise<VersionedPlant | null>;
  /** Up to `limit` plants with id > afterId, ascending, filtered by owner and tag (with versions if asked). */
  listPlants(q: PageQuery): Promise<(PlantRecord & { version?: number })[]>;
  /**
   * Changes the plant if it exists, (owner non-null) belongs to owner and (ifVersions non-null) has
   * one of those versions: the check and the change are one atomic step, whichever process or
   * instance races it. A change takes a new version; with `idem`, the outcome is recorded against
   * the claimed key; with `event`, a plant.updated event (with `previous`) and its deliveries — all
   * in one transaction. A patch that changes nothing writes nothing but the key's outcome.
   */
  updatePlant(
    id: number,
    owner: string | null,
    patch: PlantPatch,
    ifVersions: number[] | null,
    idem?: IdempotencyRef,
    event?: NewEvent,
  ): Promise<UpdateResult>;
  /**
   * Deletes the plant if it exists, (owner non-null) belongs to owner and (ifVersions non-null)
   * has one of those versions; with `event`, as createPlant. 'mismatch' (only with ifVersions):
   * it exists and is the owner's, in another version, and was kept.
   */
  deletePlant(
    id: number,
    owner: string | null,
    event?: NewEvent,
    ifVersions?: number[] | null,
  ): Promise<boolean | 'mismatch'>;

  insertEndpoint(endpoint: EndpointRecord): Promise<void>;
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
   * may call this at once; each delivery goes to one of them.
   */
  claimDeliveries(q: {
    now: Date;
    leaseMs: number;
    leaseOwner: string;
    limit: number;
    /** Most deliveries of one endpoint in this claim. */
    perEndpoint: number;
    skipEndpoints: string[];
  }): Promise<DeliveryJob[]>;
  /** Logs an attempt and reschedules (nextAttemptAt) or ends its delivery; ignored if the lease was lost. */
  finishDelivery(f: FinishedAttempt): Promise<void>;
  /** An endpoint's attempts, newest first, older than `beforeId` when given. */
  listAttempts(endpointId: string, q: { limit: number; beforeId: string | null }): Promise<AttemptRecord[]>;
  /**
   * Queues again every event since `since` that matches the endpoint and that it has not
   * acknowledged (and is not already queued); returns how many.
   */
  recoverDeliveries(endpointId: string, since: Date, now: Date): Promise<number>;

  /** Where the event with this id stands in the log; null when it is not (or no longer) kept. */
  eventPosition(id: string): Promise<string | null>;
  /** The position after which events not yet in the log will come. */
  headPosition(): Promise<string>;
  /**
   * Events after `after`, in log order, visible to `owner` (null: everyone's). On an engine
   * with concurrent writers, only events whose every predecessor has committed are returned,
   * so that a reader never passes over one that commits late.
   */
  listEvents(q: { after: string; owner: string | null; limit: number }): Promise<EventRecord[]>;
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
  listTokens(user: string | null): Promise<TokenRecord[]>;
  /** Marks a token revoked; false when no such token or already revoked. */
  revokeToken(id: string, at: Date): Promise<boolean>;

  /**
   * What a cached list page of `owner`'s plants (null: everyone's) with `tag` (null: any) depends
   * on, as of the moment it is read, whichever process wrote. Engines that cannot know every write
   * omit it, and their list pages are never cached.
   */
  listMarks?(owner: string | null, tag: string | null): Promise<ListMarks>;
  /** Writes a consistent copy of the whole store to a new file, online (embedded engines only). */
  backup?(file: string): Promise<void>;
  /** Connection pool use, for engines that pool. */
  poolStats?(): PoolStats;
  /** Resolves when the store answers a trivial query. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
