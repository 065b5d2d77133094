import { linkSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';

// A lock between the processes of one machine: a file holding its holder's process id (the backup
// schedule's, backups.ts). It appears with its content, linked from a file of the process's own (a
// link fails where the name exists): created empty and then written, another process could read it
// in between, find no id, and take it over as stale (two backups 3 ms apart, seen in CI).
//
// A lock whose process is gone (killed while it held it), or older than a day, is stale and taken
// over. Two processes may judge the same lock stale; had each then removed it and linked its own,
// the second would have removed the first's new lock and both would hold one. So a takeover is
// itself done under a second lock (`<lock>.takeover`, taken the same way), under which the lock is
// judged again: the second process finds the first's lock, held by a live process, and gives up.
// A takeover lock left by a process killed during its takeover (a few system calls) is stale in
// the same way, or once a minute old, and removed; only that removal is not guarded further.

const LOCK_MAX_MS = 86_400_000;
const TAKEOVER_MAX_MS = 60_000;

/** What a test may run between a process's judging the lock stale and its taking it over. */
export interface TakeLockHooks {
  judgedStale?: () => void;
}

let taking = 0;

/** Takes the lock at `path` for this process: true if it now holds it. */
export function takeLock(path: string, hooks: TakeLockHooks = {}): boolean {
  const mine = `${path}.${process.pid}-${++taking}`;
  writeFileSync(mine, String(process.pid));
  try {
    if (link(mine, path)) return true;
    if (!stale(path, LOCK_MAX_MS)) return false;
    hooks.judgedStale?.();
    const takeover = `${path}.takeover`;
    if (!link(mine, takeover)) {
      if (!stale(takeover, TAKEOVER_MAX_MS)) return false;
      rmSync(takeover, { force: true });
      if (!link(mine, takeover)) return false;
    }
    try {
      // Judged again under the takeover lock: another process may have taken it over since.
      if (!stale(path, LOCK_MAX_MS)) return false;
      rmSync(path, { force: true });
      return link(mine, path);
    } finally {
      rmSync(takeover, { force: true });
    }
  } finally {
    rmSync(mine, { force: true });
  }
}

/** Lets go of the lock at `path` if this process holds it (never another's, taken over from it). */
export function releaseLock(path: string): void {
  if (holder(path) === process.pid) rmSync(path, { force: true });
}

// Links `from` to `to`: false where `to` exists.
function link(from: string, to: string): boolean {
  try {
    linkSync(from, to);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
}

function holder(path: string): number | null {
  try {
    const pid = Number(readFileSync(path, 'utf8'));
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

// A lock is stale when it is gone, older than `maxMs`, holds no process id, or its process is gone.
function stale(path: string, maxMs: number): boolean {
  try {
    if (statSync(path).mtimeMs < Date.now() - maxMs) return true;
    const pid = holder(path);
    if (pid === null) return true;
    process.kill(pid, 0);
    return false;
  } catch (err) {
    // ENOENT: the lock is gone; ESRCH: no such process. (EPERM: it exists, under another user.)
    return (err as NodeJS.ErrnoException).code !== 'EPERM';
  }
}
