import type { Scope } from '../schemas/token.js';

/** A plant as the store keeps it. `tag` is null when absent. */
export interface PlantRecord {
  id: number;
  owner: string;
  name: string;
  tag: string | null;
}

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

/** What a finished idempotent create produced, enough to replay it. */
export interface IdempotencyOutcome {
  status: number;
  plantId: number | null;
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

export type CreateResult = { created: PlantRecord } | { exists: true };

/**
 * Everything the service needs from persistence, in domain terms. Every engine implements it
 * and passes the same contract tests (test/store). A resolved write is durable.
 */
export interface Store {
  readonly engine: string;
  /** Applies pending migrations; returns the names applied now. */
  migrate(): Promise<string[]>;
  /** Inserts a plant; with `idem`, records the outcome against the claimed key in the same transaction. */
  createPlant(plant: NewPlant, idem?: IdempotencyRef): Promise<CreateResult>;
  /** The plant with this id, whoever owns it. */
  getPlant(id: number): Promise<PlantRecord | null>;
  /** Up to `limit` plants with id > afterId, ascending, filtered by owner and tag. */
  listPlants(q: PageQuery): Promise<PlantRecord[]>;
  /** Deletes the plant if it exists and (owner non-null) belongs to owner. */
  deletePlant(id: number, owner: string | null): Promise<boolean>;

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
   * A value that changes whenever the plants visible to `owner` (null: everyone's) may have
   * changed, through this process or any other, as of the moment it is read. Engines that cannot
   * know every write omit it, and their list pages are never cached.
   */
  listVersion?(owner: string | null): Promise<string>;
  /** Writes a consistent copy of the whole store to a new file, online (embedded engines only). */
  backup?(file: string): Promise<void>;
  /** Connection pool use, for engines that pool. */
  poolStats?(): PoolStats;
  /** Resolves when the store answers a trivial query. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
