import type { Store } from '../store/store.js';
import { inSpan } from '../telemetry/tracing.js';

/** Entries one transaction of the service's purge erases at most (with their events). */
export const PURGE_BATCH = 500;

/**
 * Erases every trash entry due at `now`, a batch of `batch` per transaction, so that no write waits
 * for more than one batch; stops at the first batch that is not full (done, or another instance
 * is purging: it goes on next round). Returns how many it erased.
 */
export function purgeExpiredTrash(store: Store, now: Date, batch = PURGE_BATCH): Promise<number> {
  // Traces on: a span of its own (a trace of its own: no request caused it), its batches under it.
  return inSpan(
    'trash purge',
    {},
    async () => {
      let total = 0;
      for (;;) {
        const n = await store.purgeExpiredTrash(now, batch);
        total += n;
        if (n < batch) return total;
      }
    },
    { kind: 'internal', parent: null },
  );
}
