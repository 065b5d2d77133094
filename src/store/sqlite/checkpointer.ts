import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

// Runs in a worker thread with its own connection: copies the WAL back into the database file
// (PASSIVE: never blocks readers or writers) so the serving thread's commits never pay for it.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma('busy_timeout = 1000');
const timer = setInterval(() => {
  try { db.pragma('wal_checkpoint(PASSIVE)'); } catch {}
}, workerData.intervalMs);
parentPort.on('message', () => { clearInterval(timer); db.close(); process.exit(0); });
`;

/** Checkpoints a WAL-mode SQLite file every `intervalMs` from a worker thread. */
export class Checkpointer {
  private readonly worker: Worker;
  private readonly exited: Promise<unknown>;

  constructor(path: string, intervalMs = 1000) {
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { path, intervalMs, driver: createRequire(import.meta.url).resolve('better-sqlite3') },
    });
    this.worker.unref();
    this.worker.on('error', () => {});
    this.exited = new Promise((resolve) => this.worker.once('exit', resolve));
  }

  /** Stops the worker (it closes its connection); gives up waiting after 2 s. */
  async stop(): Promise<void> {
    // Keep the process alive until the worker has closed its connection.
    this.worker.ref();
    this.worker.postMessage('stop');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.exited, new Promise((resolve) => (timer = setTimeout(resolve, 2000)))]);
    clearTimeout(timer);
  }
}
