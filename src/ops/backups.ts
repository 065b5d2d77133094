import { mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type BackupMade, backupOnThread } from '../store/sqlite/backup.js';
import { inSpan } from '../telemetry/tracing.js';
import { releaseLock, takeLock } from './file-lock.js';

// Scheduled backups of a SQLite store by `serve` (contract section 12: --backup-dir, --backup-every,
// --backup-keep). Every process serving the file runs a schedule; one of them takes each backup:
// the one that holds the directory's lock file, when the newest backup there is older than half
// the period. Old backups are removed only after a new one has been checked good.

/** A backup file's name in the directory: plantstore-<UTC time>.db, so names sort by time. */
export const backupName = (at: Date) => `plantstore-${at.toISOString().replace(/[:.]/g, '-')}.db`;
const BACKUP = /^plantstore-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z\.db$/;
const LOCK = '.plantstore-backup.lock';

export interface BackupScheduleOptions {
  /** The store's file. */
  source: string;
  dir: string;
  everyMs: number;
  keep: number;
  log: {
    info(obj: object, msg: string): void;
    error(obj: object, msg: string): void;
  };
  /** Told of each backup taken, and of each that failed. */
  onBackup?: (made: BackupMade) => void;
  onFailure?: () => void;
  now?: () => Date;
}

/** What one turn of the schedule did. */
export type BackupTurn = { taken: string } | { skipped: 'recent' | 'locked' } | { failed: string };

export class BackupSchedule {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<BackupTurn> | undefined;
  private stopped = false;

  constructor(private readonly o: BackupScheduleOptions) {}

  private now(): Date {
    return this.o.now?.() ?? new Date();
  }

  /** Takes a backup every period (the first once the newest one is a period old), until stopped. */
  start(): void {
    const newest = this.newest();
    const due = newest === undefined ? 0 : Math.max(0, newest + this.o.everyMs - this.now().getTime());
    this.schedule(Math.min(due, this.o.everyMs));
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.turn();
      void this.running.finally(() => this.schedule(this.o.everyMs));
    }, ms);
    this.timer.unref();
  }

  /** Stops the schedule; a backup under way finishes (or fails) first. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One turn: take a backup unless another process is taking one or a recent one is there. */
  async turn(): Promise<BackupTurn> {
    try {
      mkdirSync(this.o.dir, { recursive: true });
    } catch (err) {
      return this.failed(err);
    }
    try {
      if (!takeLock(join(this.o.dir, LOCK))) return { skipped: 'locked' };
    } catch (err) {
      return this.failed(err);
    }
    try {
      const newest = this.newest();
      if (newest !== undefined && newest > this.now().getTime() - this.o.everyMs / 2)
        return { skipped: 'recent' };
      const target = join(this.o.dir, backupName(this.now()));
      const made = await inSpan('backup', {}, () => backupOnThread(this.o.source, target), {
        kind: 'internal',
        parent: null,
      });
      this.o.onBackup?.(made);
      const removed = this.rotate();
      this.o.log.info(
        { backup: target, bytes: made.bytes, plants: made.plants, asOf: made.asOf.toISOString(), removed },
        'backup taken',
      );
      return { taken: target };
    } catch (err) {
      return this.failed(err);
    } finally {
      releaseLock(join(this.o.dir, LOCK));
    }
  }

  private failed(err: unknown): BackupTurn {
    this.o.onFailure?.();
    const reason = (err as Error).message;
    this.o.log.error({ dir: this.o.dir, reason }, 'backup failed; serving goes on');
    return { failed: reason };
  }

  // The backups in the directory, oldest first.
  private backups(): string[] {
    return readdirSync(this.o.dir)
      .filter((f) => BACKUP.test(f))
      .sort();
  }

  // When the newest backup was written (ms), if there is one.
  private newest(): number | undefined {
    try {
      const last = this.backups().at(-1);
      return last === undefined ? undefined : statSync(join(this.o.dir, last)).mtimeMs;
    } catch {
      return undefined;
    }
  }

  // Keeps the newest `keep`; answers what it removed.
  private rotate(): string[] {
    const all = this.backups();
    const old = all.slice(0, Math.max(0, all.length - this.o.keep));
    for (const f of old) rmSync(join(this.o.dir, f), { force: true });
    return old;
  }
}
