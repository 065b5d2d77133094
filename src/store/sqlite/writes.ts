import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { IdSpaceExhaustedError } from '../../errors.js';
import { recordedOutcome } from '../plant-changes.js';
import {
  type Change,
  type Claim,
  type ClaimQuery,
  type CreateResult,
  type EndpointPatch,
  type EndpointRecord,
  type FinishedAttempt,
  type IdempotencyClaim,
  type IdempotencyRef,
  type LeaseRenewal,
  type LogProgress,
  type QueuedLeaseRenewal,
  refused,
  type TokenRecord,
  type TokenRefusal,
  type UpdateResult,
} from '../store.js';
import { SqliteEvents } from './events.js';
import { SqliteGardenWrites } from './gardens.js';
import { planStatementsOnce } from './plan-once.js';
import { SqlitePlantWrites, type WrittenBatch } from './plant-writes.js';
import { createPrivate } from './private-file.js';
import {
  AUTOMERGE_READ_SQL,
  AUTOMERGE_SQL,
  FTS5_AUTOMERGE,
  MERGE_STEP_PAGES,
  MERGE_STEP_SQL,
  mergeWanted,
  PACED_SEGMENTS,
  PACED_STEP_PAGES,
  pacedWanted,
  STRUCTURE_SQL,
  searchLevels,
  smallMergeLevel,
  USERMERGE_SQL,
} from './search-merge.js';
import { SqliteTrashWrites } from './trash.js';

/** Opens a connection the way every plantstore connection is set up (WAL, durability, waits). */
export function openConnection(path: string, durability: 'full' | 'normal'): Database.Database {
  if (path !== ':memory:') {
    mkdirSync(dirname(path), { recursive: true });
    createPrivate(path);
  }
  const db = new Database(path);
  // Every statement of this connection is planned once, not again on every call.
  planStatementsOnce(db);
  try {
    // First, so that the pragmas after it wait for a lock (another connection migrating) too.
    db.pragma('busy_timeout = 5000');
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${durability === 'full' ? 'FULL' : 'NORMAL'}`);
    // Checkpoints happen in a worker thread of their own; the automatic one stays as a backstop.
    if (path !== ':memory:') db.pragma('wal_autocheckpoint = 10000');
    db.pragma('foreign_keys = ON');
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

interface IdemRow {
  request_hash: string;
  state: 'pending' | 'done';
  status: number | null;
  plant_id: number | null;
  created_at: number;
  locked_at: number;
  response: string | null;
}

/** One write's outcome: its value, or what it threw. */
export type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** A write as it travels to the writer: the SqliteWrites method and its arguments. */
export interface WriteOp {
  op: WriteName;
  args: unknown[];
}

/** What a committed batch tells the serving thread. */
export interface BatchResult {
  outcomes: Outcome[];
  /** Events and webhook deliveries the batch wrote (the process's listeners are told when there are any). */
  queued: number;
}

/**
 * Every write plantstore makes to SQLite (plants', gardens' and events' by their own modules), and
 * group commit: the writes of a batch run in one transaction (one fsync); a failing write fails
 * alone. Runs wherever the store's writer is: in a thread of its own for a file (so that no
 * commit, and no fsync, holds the event loop), inline for ':memory:'. Everything a write needs is
 * in its arguments, so a write can be sent to a thread.
 */
export class SqliteWrites {
  private stmts: ReturnType<SqliteWrites['prepare']> | undefined;
  private eventsSql: SqliteEvents | undefined;
  private gardensSql: SqliteGardenWrites | undefined;
  private plantsSql: SqlitePlantWrites | undefined;
  private trashSql: SqliteTrashWrites | undefined;

  constructor(
    private readonly db: Database.Database,
    /** Who writes, in the write clock (LocalMarks tells its own writer's commits from others'). */
    private readonly writer: string,
    /** The connection's `synchronous` between statements ('full': FULL); a paced merge step lowers it. */
    private readonly durability: 'full' | 'normal' = 'normal',
  ) {}

  // Prepared on first use: the tables exist only once migrate() has run.
  private get s() {
    this.stmts ??= this.prepare();
    return this.stmts;
  }

  private get e(): SqliteEvents {
    this.eventsSql ??= new SqliteEvents(this.db);
    return this.eventsSql;
  }

  private get g(): SqliteGardenWrites {
    this.gardensSql ??= new SqliteGardenWrites(
      this.db,
      () => this.e,
      () => this.t,
    );
    return this.gardensSql;
  }

  private get p(): SqlitePlantWrites {
    this.plantsSql ??= new SqlitePlantWrites(
      this.db,
      () => this.e,
      () => this.t,
    );
    return this.plantsSql;
  }

  private get t(): SqliteTrashWrites {
    this.trashSql ??= new SqliteTrashWrites(
      this.db,
      () => this.e,
      () => this.p,
    );
    return this.trashSql;
  }

  private prepare() {
    const db = this.db;
    return {
      getIdem: db.prepare<[string, string], IdemRow>(
        'SELECT request_hash, state, status, plant_id, created_at, locked_at, response FROM idempotency_keys WHERE user_id = ? AND key = ?',
      ),
      putIdem: db.prepare<[string, string, string, number, number]>(
        `INSERT OR REPLACE INTO idempotency_keys (user_id, key, request_hash, state, created_at, locked_at)
         VALUES (?, ?, ?, 'pending', ?, ?)`,
      ),
      relockIdem: db.prepare<[number, string, string]>(
        'UPDATE idempotency_keys SET locked_at = ? WHERE user_id = ? AND key = ?',
      ),
      dropIdem: db.prepare<[string, string]>(
        `DELETE FROM idempotency_keys WHERE user_id = ? AND key = ? AND state = 'pending'`,
      ),
      purgeIdem: db.prepare<[number]>('DELETE FROM idempotency_keys WHERE created_at < ?'),
      insertToken: db.prepare<[string, string, string | null, string, string, number, number | null]>(
        `INSERT INTO tokens (id, user_id, name, scopes, hash, created_at, expires_at, seq)
         VALUES (?, ?, ?, ?, ?, ?, ?, (SELECT coalesce(max(seq), 0) + 1 FROM tokens))`,
      ),
      revokeToken: db.prepare<[number, string]>(
        'UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL',
      ),
      tokenExists: db.prepare<[string], number>('SELECT 1 FROM tokens WHERE id = ?').pluck(),
      mergeSearch: db.prepare<[number]>(MERGE_STEP_SQL),
      searchStructure: db.prepare<[], Buffer>(STRUCTURE_SQL).pluck(),
      usermerge: db.prepare<[number]>(USERMERGE_SQL),
      automerge: db.prepare<[number]>(AUTOMERGE_SQL),
      automergeRead: db.prepare<[], number | string>(AUTOMERGE_READ_SQL).pluck(),
      syncNormal: db.prepare('PRAGMA synchronous = NORMAL'),
      syncFull: db.prepare('PRAGMA synchronous = FULL'),
      totalChanges: db.prepare<[], number>('SELECT total_changes()').pluck(),
      touchToken: db.prepare<[number, string, number]>(
        'UPDATE tokens SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)',
      ),
      // One row per database: commits that changed plants, the last one's writer and where that
      // writer's run began, and the rows plantstore writers changed (triggers count every row).
      // ...and the last plant version given (rev).
      tick: db.prepare<[{ writer: string; changed: number; rev: number }]>(
        `UPDATE write_clock SET n = n + 1, run_start = CASE WHEN writer = @writer THEN run_start ELSE n + 1 END,
           writer = @writer, clocked = clocked + @changed, rev = max(rev, @rev)`,
      ),
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      savepoint: db.prepare('SAVEPOINT w'),
      release: db.prepare('RELEASE w'),
      rollbackTo: db.prepare('ROLLBACK TO w'),
    };
  }

  /**
   * Runs the batch in one transaction and commits it; throws when the transaction itself cannot
   * be (then no write of the batch took effect). Returns only after COMMIT, i.e. once the batch is
   * durable as the connection's durability says.
   */
  commit(batch: WriteOp[]): BatchResult {
    let queued = 0;
    try {
      // Inside the try: preparing the statements fails on a closed database.
      const s = this.s;
      s.begin.run();
      this.plantsSql?.begin();
      // Writes rarely fail, so the batch first runs without a savepoint per write; if one throws,
      // the whole transaction is rolled back and the batch runs again with a savepoint around each
      // write. (A write only runs statements, so running it twice is harmless.)
      let outcomes = this.run(batch, false);
      if (outcomes === null) {
        s.rollback.run();
        this.eventsSql?.forget();
        this.plantsSql?.begin();
        s.begin.run();
        outcomes = this.run(batch, true) as Outcome[];
      }
      // The batch's events are written in its transaction (the event only: endpoints follow the log).
      queued = this.eventsSql?.writeEvents() ?? 0;
      const changed = plantsChanged(batch, outcomes);
      if (changed > 0) s.tick.run({ writer: this.writer, changed, rev: this.plantsSql?.lastVersion ?? 0 });
      // Last: no statement after it opens a statement journal, which would make FTS5 flush (plant-writes.ts).
      this.plantsSql?.flushWords();
      s.commit.run();
      return { outcomes, queued };
    } catch (err) {
      this.eventsSql?.forget();
      if (this.db.open && this.db.inTransaction) this.s.rollback.run();
      throw err;
    }
  }

  /** Runs the writes in the open transaction; without savepoints, null as soon as one throws. */
  private run(batch: WriteOp[], isolated: boolean): Outcome[] | null {
    const s = this.s;
    const outcomes: Outcome[] = [];
    for (const { op, args } of batch) {
      const fn = this[op] as (...a: unknown[]) => unknown;
      if (!isolated) {
        try {
          outcomes.push({ ok: true, value: fn.apply(this, args) });
        } catch {
          return null;
        }
        continue;
      }
      // Prepared SAVEPOINT statements: no transaction wrapper built per write.
      s.savepoint.run();
      const mark = this.eventsSql?.mark() ?? 0;
      const wordsMark = this.plantsSql?.markWords() ?? 0;
      try {
        outcomes.push({ ok: true, value: fn.apply(this, args) });
      } catch (error) {
        s.rollbackTo.run();
        this.eventsSql?.rewind(mark);
        this.plantsSql?.rewindWords(wordsMark);
        outcomes.push({ ok: false, error });
      }
      s.release.run();
    }
    return outcomes;
  }

  // The writes. Each runs inside commit()'s transaction.

  createPlant(...a: Parameters<SqlitePlantWrites['create']>) {
    return this.p.create(...a);
  }

  createPlants(...a: Parameters<SqlitePlantWrites['createMany']>) {
    return this.p.createMany(...a);
  }

  updatePlant(...a: Parameters<SqlitePlantWrites['update']>) {
    return this.p.update(...a);
  }

  deletePlant(...a: Parameters<SqlitePlantWrites['delete']>) {
    return this.p.delete(...a);
  }

  restorePlant(...a: Parameters<SqliteTrashWrites['restore']>) {
    return this.t.restore(...a);
  }

  purgeTrashed(...a: Parameters<SqliteTrashWrites['purge']>) {
    return this.t.purge(...a);
  }

  purgeExpiredTrash(...a: Parameters<SqliteTrashWrites['purgeExpired']>) {
    return this.t.purgeExpired(...a);
  }

  homeGarden(...a: Parameters<SqliteGardenWrites['home']>) {
    return this.g.home(...a);
  }

  createGarden(...a: Parameters<SqliteGardenWrites['create']>) {
    return this.g.create(...a);
  }

  renameGarden(...a: Parameters<SqliteGardenWrites['rename']>) {
    return this.g.rename(...a);
  }

  deleteGarden(...a: Parameters<SqliteGardenWrites['delete']>) {
    return this.g.delete(...a);
  }

  putMember(...a: Parameters<SqliteGardenWrites['putMember']>) {
    return this.g.putMember(...a);
  }

  removeMember(...a: Parameters<SqliteGardenWrites['removeMember']>) {
    return this.g.removeMember(...a);
  }

  insertEndpoint(endpoint: EndpointRecord): Change<true, 'too_many_endpoints'> {
    return this.e.insertEndpoint(endpoint);
  }

  updateEndpoint(id: string, patch: EndpointPatch): Change<EndpointRecord, 'missing'> {
    return this.e.updateEndpoint(id, patch);
  }

  deleteEndpoint(id: string): Change<true, 'missing'> {
    return this.e.deleteEndpoint(id);
  }

  claimDeliveries(q: ClaimQuery): Claim {
    return this.e.claim(q);
  }

  renewLeases(q: LeaseRenewal): string[] {
    return this.e.renewLeases(q);
  }

  renewQueuedLeases(q: QueuedLeaseRenewal): string[] {
    return this.e.renewQueuedLeases(q);
  }

  finishDeliveries(f: FinishedAttempt[], progress?: LogProgress[]): void {
    this.e.finish(f, progress);
  }

  recoverDeliveries(endpointId: string, since: Date, now: Date): number {
    return this.e.recover(endpointId, since, now);
  }

  purgeEvents(before: Date): number {
    return this.e.purge(before);
  }

  claimIdempotencyKey(
    ref: IdempotencyRef,
    requestHash: string,
    now: number,
    staleAfterMs: number,
    retainMs: number,
  ): IdempotencyClaim {
    const row = this.s.getIdem.get(ref.user, ref.key);
    if (!row || row.created_at < now - retainMs) {
      this.s.putIdem.run(ref.user, ref.key, requestHash, now, now);
      return { ok: true };
    }
    if (row.request_hash !== requestHash) return refused('mismatch');
    if (row.state === 'pending') {
      if (row.locked_at >= now - staleAfterMs) return refused('in_flight');
      this.s.relockIdem.run(now, ref.user, ref.key);
      return { ok: true };
    }
    return refused('done', { outcome: recordedOutcome(row.status, row.plant_id, row.response) });
  }

  releaseIdempotencyKey(ref: IdempotencyRef): void {
    this.s.dropIdem.run(ref.user, ref.key);
  }

  purgeIdempotencyKeys(before: number): number {
    return this.s.purgeIdem.run(before).changes;
  }

  insertToken(t: TokenRecord): void {
    this.s.insertToken.run(
      t.id,
      t.user,
      t.name,
      t.scopes.join(' '),
      t.hash,
      t.createdAt.getTime(),
      t.expiresAt ? t.expiresAt.getTime() : null,
    );
  }

  revokeToken(id: string, at: number): Change<true, TokenRefusal> {
    if (this.s.revokeToken.run(at, id).changes > 0) return { ok: true };
    return refused(this.s.tokenExists.get(id) === undefined ? 'missing' : 'revoked');
  }

  /** The search index's segments, level by level (search-merge.ts). */
  private searchLevels() {
    const structure = this.s.searchStructure.get();
    return structure === undefined ? [] : searchLevels(structure);
  }

  /** Runs FTS5's 'merge' with `pages`; whether it merged anything. */
  private merged(pages: number): boolean {
    // The statement counts as one change of its own; a step with nothing to merge writes nothing else.
    const before = this.s.totalChanges.get()!;
    this.s.mergeSearch.run(pages);
    return this.s.totalChanges.get()! - before > 1;
  }

  /** Sets FTS5's `usermerge` (search-merge.ts): a positive 'merge' takes a level of `segments` or more. */
  private usermerge(segments: number): void {
    if (this.usermergeNow === segments) return;
    this.s.usermerge.run(segments);
    this.usermergeNow = segments;
  }

  /** One step of merging the search index (search-merge.ts); whether it merged anything. */
  mergeSearch(): boolean {
    const now = this.searchLevels();
    if (mergeWanted(now)) return this.merged(-MERGE_STEP_PAGES);
    // Small merges a page at a time, each looked at first so that none reaches the largest segment.
    if (smallMergeLevel(now) < 0) return false;
    this.usermerge(2);
    let pages = 0;
    let level = smallMergeLevel(now);
    while (level >= 0 && pages < MERGE_STEP_PAGES && this.merged(1)) {
      pages++;
      level = smallMergeLevel(this.searchLevels());
    }
    return pages > 0;
  }

  /** FTS5's `usermerge` as this writer last set it on the store (search-merge.ts). */
  private usermergeNow: number | undefined;

  /**
   * Sets FTS5's `automerge` to `value` unless the store holds it already: 0 for a writer that
   * paces its merges (pacedMerge), FTS5's default for one that leaves them to FTS5.
   */
  searchAutomerge(value: number): void {
    const held = this.s.automergeRead.get();
    if ((held === undefined ? FTS5_AUTOMERGE : Number(held)) !== value) this.s.automerge.run(value);
  }

  /**
   * A paced step of merging the search index (search-merge.ts), its own transaction; whether
   * another is due. Its commit does not wait for the disk: a merge step lost to a power cut leaves
   * the index as it was before the step, and the next durable commit syncs it with its own.
   */
  pacedMerge(): boolean {
    if (!pacedWanted(this.searchLevels())) return false;
    this.usermerge(PACED_SEGMENTS);
    const full = this.durability === 'full';
    if (full) this.s.syncNormal.run();
    let merged: boolean;
    try {
      merged = this.merged(PACED_STEP_PAGES);
    } finally {
      if (full) this.s.syncFull.run();
    }
    return merged && pacedWanted(this.searchLevels());
  }

  touchTokens(ids: string[], minute: number): number {
    let n = 0;
    for (const id of ids) n += this.s.touchToken.run(minute, id, minute).changes;
    return n;
  }
}

/** How many plant rows the batch's writes created, changed or deleted. */
function plantsChanged(batch: WriteOp[], outcomes: Outcome[]): number {
  let n = 0;
  batch.forEach(({ op }, i) => {
    const o = outcomes[i]!;
    if (!o.ok) return;
    if (op === 'createPlants') {
      const r = o.value as WrittenBatch;
      if ('made' in r) n += r.made.ids.length;
    } else if (op === 'createPlant' || op === 'deletePlant' || op === 'restorePlant') {
      if ('ok' in (o.value as CreateResult)) n++;
    } else if (op === 'updatePlant') {
      const r = o.value as UpdateResult;
      if ('ok' in r && r.ok.changed) n++;
    }
  });
  return n;
}

/** The names of the writes (the methods a WriteOp may call). */
export type WriteName = Exclude<keyof SqliteWrites, 'commit'>;

/** An error as it crosses from the writer's thread: enough to rebuild what the store answers. */
export type SentError =
  | { kind: 'id_space' }
  | { kind: 'error'; name: string; message: string; code?: string };

export function sendError(err: unknown): SentError {
  if (err instanceof IdSpaceExhaustedError) return { kind: 'id_space' };
  const e = err as { name?: unknown; message?: unknown; code?: unknown };
  return {
    kind: 'error',
    name: typeof e?.name === 'string' ? e.name : 'Error',
    message: typeof e?.message === 'string' ? e.message : String(err),
    ...(typeof e?.code === 'string' ? { code: e.code } : {}),
  };
}

export function receiveError(sent: SentError): Error {
  if (sent.kind === 'id_space') return new IdSpaceExhaustedError();
  const err = sent.name === 'TypeError' ? new TypeError(sent.message) : new Error(sent.message);
  if (sent.code !== undefined) Object.assign(err, { code: sent.code });
  return err;
}
