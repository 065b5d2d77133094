/**
 * The SQLite writer's thread (writer.ts, ThreadWriter): one connection, one transaction per batch.
 * The batches that arrive while a commit is being made durable are committed together next, so a
 * slow fsync makes batches larger rather than writes slower one by one.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { FTS5_AUTOMERGE } from './search-merge.js';
import { type BatchResult, openConnection, SqliteWrites, sendError, type WriteOp } from './writes.js';

interface Sent {
  n: number;
  ops: WriteOp[];
}

const port = parentPort!;
const { path, durability, writer, paced } = workerData as {
  path: string;
  durability: 'full' | 'normal';
  writer: string;
  /** Merge the search index in paced steps, FTS5's automerge off (search-merge.ts); else FTS5's way. */
  paced: boolean;
};
const db = openConnection(path, durability);
// Statement journals and RETURNING's rows in memory. With SQLite's default (temp files, which start
// as a 64 KiB spill buffer), every plant insert paid for one of each: its write clock trigger makes
// it a multi-row statement, and `ON CONFLICT … RETURNING` gathers its row in a temporary table. The
// insert took 39 µs of CPU in a 1,000-plant transaction, 10 µs with this (bench/store-create-cost.ts
// and docs/benchmarks.md). This connection only writes a transaction's few rows at a time: nothing
// it does sorts or spills more than a batch's pages.
db.pragma('temp_store = MEMORY');
const writes = new SqliteWrites(db, writer, durability);
port.postMessage('ready');
let queue: Sent[] = [];
let scheduled = false;
let closing = false;
/** The store's FTS5 `automerge` has been set for this writer's way of merging (after the first commit: the index exists). */
let automergeSet = false;
let pacing = false;

/**
 * A paced merge step (search-merge.ts). Scheduled after each commit's answers are sent: the batches
 * that came meanwhile wait for this one step. Further steps follow only while nothing is queued.
 */
function pace(): void {
  pacing = false;
  if (closing) return;
  let more = false;
  try {
    if (!automergeSet) {
      writes.searchAutomerge(paced ? 0 : FTS5_AUTOMERGE);
      automergeSet = true;
    }
    more = paced && writes.pacedMerge();
  } catch {
    // A busy lock or a store not yet migrated: the next commit tries again.
  }
  if (more && queue.length === 0) schedulePace();
}

function schedulePace(): void {
  if (pacing) return;
  pacing = true;
  setImmediate(pace);
}

function drain(): void {
  scheduled = false;
  const batches = queue;
  queue = [];
  if (batches.length > 0) {
    const ops = batches.flatMap((b) => b.ops);
    let result: BatchResult | undefined;
    let failed: unknown;
    try {
      result = writes.commit(ops);
    } catch (err) {
      failed = err;
    }
    // Each batch the serving thread sent gets its own outcomes back.
    let at = 0;
    for (const b of batches) {
      if (result === undefined) port.postMessage({ n: b.n, failed: sendError(failed) });
      else {
        const outcomes = result.outcomes
          .slice(at, at + b.ops.length)
          .map((o) => (o.ok ? o : { ok: false, error: sendError(o.error) }));
        // Listeners for events need waking once per commit that wrote some.
        port.postMessage({ n: b.n, result: { outcomes, queued: at === 0 ? result.queued : 0 } });
      }
      at += b.ops.length;
    }
    if (result !== undefined && (paced || !automergeSet)) schedulePace();
  }
  if (closing) {
    db.close();
    port.close();
  }
}

port.on('message', (msg: Sent | 'close') => {
  if (msg === 'close') closing = true;
  else queue.push(msg);
  if (!scheduled) {
    scheduled = true;
    setImmediate(drain);
  }
});
