import type { Store } from '../store/store.js';

// How often /healthz may ask the store for its schema version again.
const SCHEMA_REFRESH_MS = 1_000;

/** Whether this process can serve: liveness asks nothing, readiness asks the store. */
export class HealthService {
  private known: number;
  private askedAt = Date.now();
  private asking = false;

  constructor(
    private readonly store: Pick<Store, 'ping' | 'schemaVersion'>,
    /** The store's schema version when this process started (after migrating). */
    schema: number,
  ) {
    this.known = schema;
  }

  /** Resolves when the store answers a query; rejects (503 store_unavailable) otherwise. */
  ready(): Promise<void> {
    return this.store.ping();
  }

  /**
   * The store's schema version as last read, at once: liveness never waits on the store. A read
   * older than a second starts another in the background, so a migration run by another process
   * (a newer release, during a deploy) shows here at the next call after it lands.
   */
  schema(): number {
    if (!this.asking && Date.now() - this.askedAt >= SCHEMA_REFRESH_MS) {
      this.asking = true;
      this.store.schemaVersion().then(
        (v) => {
          this.known = v;
          this.askedAt = Date.now();
          this.asking = false;
        },
        () => {
          this.askedAt = Date.now();
          this.asking = false;
        },
      );
    }
    return this.known;
  }
}
