// Scheduled backups by `serve` (contract section 12): one every period, the newest N kept, each
// checked good; a failing backup (here: a directory that cannot be made) is logged and counted
// while the service goes on serving; two processes on one file take turns, never both.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { until } from '../helpers/wait.js';
import { cli, type Server, serve } from './process.js';

const taken = (s: Server) => s.logs.filter((l) => l.includes('"backup taken"')).length;
const TIME = /^plantstore-(\d{4}-\d\d-\d\dT\d\d)-(\d\d)-(\d\d)-(\d{3})Z\.db$/;
const timeOf = (name: string) => {
  const [, hour, min, sec, ms] = TIME.exec(name)!;
  return Date.parse(`${hour}:${min}:${sec}.${ms}Z`);
};

describe('serve --backup-dir (SQLite)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-scheduled-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('takes a backup every period and keeps the newest N, each checked good', async () => {
    const env = { DATABASE_URL: `sqlite:${join(dir, 'a.db')}` };
    const shelf = join(dir, 'shelf');
    const server = await serve(['--backup-dir', shelf, '--backup-every', '1s', '--backup-keep', '2'], env);
    try {
      await until('three backups', () => taken(server) >= 3, 30_000);
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      const last = Number(/^plantstore_backup_last_success_timestamp_seconds (\S+)$/m.exec(metrics)?.[1]);
      assert.ok(last > Date.now() / 1000 - 60, metrics.slice(0, 200));
      assert.ok(Number(/^plantstore_backup_bytes (\S+)$/m.exec(metrics)?.[1]) > 0);
      assert.match(metrics, /^plantstore_backup_failures_total 0$/m);
    } finally {
      await server.stop();
    }
    // Counted once stopped: a stop waits for a backup under way, its rotation included. Counted while
    // serving, a fourth backup could be under its final name and not yet rotated (once on Node 22).
    const files = readdirSync(shelf).filter((f) => TIME.test(f));
    assert.equal(files.length, 2, `${files}`);
    for (const f of files) {
      assert.equal((await cli(['backup', 'verify', join(shelf, f)], env)).code, 0);
      assert.equal((statSync(join(shelf, f)).mode & 0o777).toString(8), '600', f);
    }
  });

  it('logs and counts a failed backup and goes on serving', async () => {
    const env = { DATABASE_URL: `sqlite:${join(dir, 'b.db')}` };
    const blocker = join(dir, 'a-file');
    writeFileSync(blocker, 'not a directory');
    const server = await serve(['--backup-dir', join(blocker, 'backups'), '--backup-every', '1s'], env);
    try {
      await until(
        'a failure logged',
        () => server.logs.some((l) => l.includes('"backup failed; serving goes on"')),
        20_000,
      );
      const line = JSON.parse(server.logs.find((l) => l.includes('backup failed'))!);
      assert.equal(line.level, 50, 'an error line');
      assert.match(line.reason, /ENOTDIR|not a directory/);
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      assert.ok(Number(/^plantstore_backup_failures_total (\S+)$/m.exec(metrics)?.[1]) >= 1);
      assert.equal((await fetch(`${server.url}/healthz`)).status, 200, 'still serving');
    } finally {
      await server.stop();
    }
  });

  it('two processes on one file take turns: never two backups within half a period', async () => {
    const env = { DATABASE_URL: `sqlite:${join(dir, 'c.db')}` };
    const shelf = join(dir, 'shared');
    const flags = ['--backup-dir', shelf, '--backup-every', '2s', '--backup-keep', '100'];
    const one = await serve(flags, env);
    const two = await serve(flags, env);
    try {
      await until('four backups between them', () => taken(one) + taken(two) >= 4, 40_000);
    } finally {
      await Promise.all([one.stop(), two.stop()]);
    }
    const times = readdirSync(shelf)
      .filter((f) => TIME.test(f))
      .map(timeOf)
      .sort((a, b) => a - b);
    assert.ok(times.length >= 4);
    for (let i = 1; i < times.length; i++) assert.ok(times[i]! - times[i - 1]! >= 1000, `${times}`);
  });
});
