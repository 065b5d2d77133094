import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { releaseLock, takeLock } from '../../src/ops/file-lock.js';

// The backup schedule's lock between processes (src/ops/file-lock.ts): a live holder's lock is never
// taken, a dead one's is, and two processes that judge one lock stale never both take it over.

/** A process that is alive until killed. */
const live = (): ChildProcess =>
  spawn(process.execPath, ['-e', 'setInterval(() => {}, 60_000)'], { stdio: 'ignore' });
/** The id of a process that has exited. */
const gone = async (): Promise<number> => {
  const p = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
  await once(p, 'exit');
  return p.pid!;
};

describe('the lock file between processes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-lock-'));
  const children: ChildProcess[] = [];
  after(() => {
    for (const c of children) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  let n = 0;
  const fresh = () => join(dir, `lock-${++n}`);
  const holder = (path: string) => Number(readFileSync(path, 'utf8'));
  const inode = (path: string) => statSync(path).ino;

  it('is taken when free, never from a live holder, and let go only by its holder', {
    timeout: 20_000,
  }, () => {
    const path = fresh();
    assert.equal(takeLock(path), true);
    assert.equal(holder(path), process.pid);
    assert.equal(takeLock(path), false, 'held by a live process (this one)');
    releaseLock(path);
    assert.throws(() => statSync(path), /ENOENT/);

    const other = live();
    children.push(other);
    writeFileSync(path, String(other.pid));
    assert.equal(takeLock(path), false, "another live process's");
    releaseLock(path);
    assert.equal(holder(path), other.pid, "release leaves another process's lock");
    // Nothing of the attempts is left beside the lock.
    assert.deepEqual(
      readdirSync(dir).filter((f) => f.startsWith(`lock-${n}.`)),
      [],
    );
  });

  it('is taken over from a process that is gone, or when a day old', { timeout: 20_000 }, async () => {
    const path = fresh();
    writeFileSync(path, String(await gone()));
    assert.equal(takeLock(path), true);
    assert.equal(holder(path), process.pid);

    const old = fresh();
    const other = live();
    children.push(other);
    writeFileSync(old, String(other.pid));
    const dayAgo = (Date.now() - 86_400_000 - 60_000) / 1000;
    utimesSync(old, dayAgo, dayAgo);
    assert.equal(takeLock(old), true);
    assert.equal(holder(old), process.pid);
  });

  it('two takers that judge it stale: the second finds the first holding it and gives up', {
    timeout: 20_000,
  }, async () => {
    const path = fresh();
    writeFileSync(path, String(await gone()));
    let first: number | undefined;
    // The second taker judges the dead process's lock stale; before it acts, the first takes it
    // over whole. Removing the lock then, as it judged it, would remove the first's new lock.
    const second = takeLock(path, {
      judgedStale: () => {
        assert.equal(takeLock(path), true, 'the first takes it over');
        first = inode(path);
      },
    });
    assert.equal(second, false, 'the second does not take it too');
    assert.equal(inode(path), first, "the first's lock is in place");
    assert.equal(holder(path), process.pid);
  });

  it('a takeover under way in a live process is waited for; one left by a process gone is cleared', {
    timeout: 20_000,
  }, async () => {
    const path = fresh();
    writeFileSync(path, String(await gone()));
    const stale = inode(path);
    const other = live();
    children.push(other);
    writeFileSync(`${path}.takeover`, String(other.pid));
    assert.equal(takeLock(path), false, 'another process is taking it over');
    assert.equal(inode(path), stale, 'the stale lock is left to it');

    writeFileSync(`${path}.takeover`, String(await gone()));
    assert.equal(takeLock(path), true);
    assert.equal(holder(path), process.pid);
    assert.throws(() => statSync(`${path}.takeover`), /ENOENT/, 'the takeover lock is let go');
  });
});
