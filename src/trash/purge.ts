import type { Store } from '../store/store.js';

/** Entries one transaction of the service's purge erases at most (with their events). */
export const PURGE_BATCH = 500;

/**
 * Erases every trash entry due at `now`, a batch of `batch` per transaction, so that no write waits
 * for more than one batch; stops at the first batch that is not full (done, or another instance
 * is purging: it goes on next round). Returns how many it erased.
 */
export async function purgeExpiredTrash(store: Store, now: Date, batch = PURGE_BATCH): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await store.purgeExpiredTrash(now, batch);
    total += n;
    if (n < batch) return total;
  }
}
