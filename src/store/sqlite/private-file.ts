import { closeSync, fchmodSync, openSync } from 'node:fs';

// A store file, a backup and a restored store hold token hashes and webhook secrets: each is made
// readable by the service's user only (0600), whatever the umask, before SQLite first opens it.
// SQLite makes a database's -wal, -shm and -journal files with the database file's own mode, so
// they follow. A file that exists already keeps its mode: the operator chose it.

/** Creates `path` empty with `mode` (0600 unless given) unless it exists; answers whether it made it. */
export function createPrivate(path: string, mode = 0o600): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'wx', mode);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  try {
    // The umask took bits off the mode openSync was given; the mode is set as asked.
    fchmodSync(fd, mode);
  } finally {
    closeSync(fd);
  }
  return true;
}
