import type { PendingMigration } from './migrate.js';
import type { ChangePort } from './ports/changes.js';
import type { EventPort } from './ports/events.js';
import type { GardenPort } from './ports/gardens.js';
import type { IdempotencyPort } from './ports/idempotency.js';
import type { PlantPort } from './ports/plants.js';
import type { TokenPort } from './ports/tokens.js';
import type { TrashPort } from './ports/trash.js';

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
export { NewerSchemaError, type PendingMigration } from './migrate.js';
export * from './ports/change.js';
export * from './ports/changes.js';
export * from './ports/events.js';
export * from './ports/gardens.js';
export * from './ports/idempotency.js';
export * from './ports/plants.js';
export * from './ports/tokens.js';
export * from './ports/trash.js';

/** Connections a pooled engine holds. */
export interface PoolStats {
  size: number;
  idle: number;
  waiting: number;
}

/**
 * Everything the service needs from persistence, in domain terms. Every engine implements it
 * and passes the same contract tests (test/store). A resolved write is durable.
 */
export interface Store
  extends PlantPort,
    GardenPort,
    EventPort,
    ChangePort,
    TokenPort,
    IdempotencyPort,
    TrashPort {
  readonly engine: string;
  /** Applies pending migrations; returns the names applied now. */
  migrate(): Promise<string[]>;
  /** The migrations migrate() would apply, applying none; NewerSchemaError if the schema is newer. */
  migrationsPending(): Promise<PendingMigration[]>;
  /** The store's schema version: the newest migration applied (0 for an empty store). */
  schemaVersion(): Promise<number>;
  /** Writes a consistent copy of the whole store to a new file, online (embedded engines only). */
  backup?(file: string): Promise<void>;
  /** Connection pool use, for engines that pool. */
  poolStats?(): PoolStats;
  /** Resolves when the store answers a trivial query. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
