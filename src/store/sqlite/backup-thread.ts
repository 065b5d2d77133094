/**
 * A backup taken off the serving thread (ops/backups.ts): backupStore's single-step copy and its
 * check are synchronous, so they run here, and the event loop that serves requests never waits for them.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { backupStore } from './backup.js';

const { source, target } = workerData as { source: string; target: string };
backupStore(source, target).then(
  (made) =>
    parentPort!.postMessage({
      ok: { bytes: made.bytes, plants: made.counts.plants, asOf: made.asOf.getTime() },
    }),
  (err: Error) => parentPort!.postMessage({ error: err.message }),
);
