import type { Store } from '../store/store.js';

/** Whether this process can serve: liveness asks nothing, readiness asks the store. */
export class HealthService {
  constructor(private readonly store: Pick<Store, 'ping'>) {}

  /** Resolves when the store answers a query; rejects (503 store_unavailable) otherwise. */
  ready(): Promise<void> {
    return this.store.ping();
  }
}
