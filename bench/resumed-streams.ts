/**
 * What resumed event streams cost everyone else (SQLite): a store whose log holds N events written
 * by other users (500,000 by default), a user with an empty garden who opens 20 streams resumed
 * from the very first event (Last-Event-ID), and GET /healthz timed before and while they are open,
 * with the server's CPU over each phase. A resumed stream reads only the events its caller may see
 * (along the events' garden index) and moves past what it looked at, so the open streams should
 * leave /healthz where it was.
 *
 * The server runs on core 0 alone, this script (the streams and the /healthz client) on core 1.
 *
 *   npx tsx bench/resumed-streams.ts [--events 500000] [--streams 20] [--seconds 10] [--write] [--bin OTHER/bin/plantstore]
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { BENCH_SERVE_FLAGS, freePort, waitReady } from './ports.js';
import { printed, writeSection } from './report.js';

const { say, lines: report } = printed();
const { values: opt } = parseArgs({
  options: {
    events: { type: 'string', default: '500000' },
    streams: { type: 'string', default: '20' },
    seconds: { type: 'string', default: '10' },
    write: { type: 'boolean', default: false },
    // Another checkout's bin/plantstore (built), to measure that tree the same way.
    bin: { type: 'string' },
  },
});
const EVENTS = Number(opt.events);
const STREAMS = Number(opt.streams);
const SECONDS = Number(opt.seconds);
const ROOT = resolve(import.meta.dirname, '..');
const BIN = opt.bin ? resolve(opt.bin) : join(ROOT, 'bin/plantstore');
const tmp = mkdtempSync(join(tmpdir(), 'plantstore-resumed-'));
const file = join(tmp, 'store.db');
const pinned = availableParallelism() >= 2;
if (pinned) execFileSync('taskset', ['-cp', '1', String(process.pid)], { stdio: 'ignore' });

const plantstore = (...args: string[]) =>
  execFileSync(BIN, [...args, '--database', `sqlite:${file}`], { encoding: 'utf8' }).trim();

// The store: migrated by plantstore itself, then the others' events written straight into the log
// (as many creates by 1,000 users in 1,000 gardens would leave it), in one transaction.
plantstore('migrate');
const db = new Database(file);
const key = db.prepare('SELECT key FROM event_log').pluck().get() as string;
const insert = db.prepare(
  `INSERT INTO events (seq, type, owner, plant_id, name, tag, created_at, garden) VALUES (?, 1, ?, ?, ?, NULL, ?, ?)`,
);
const now = Date.now();
db.transaction(() => {
  for (let seq = 1; seq <= EVENTS; seq++) {
    const u = seq % 1000;
    insert.run(
      seq,
      `other-${u}`,
      seq,
      `Plant ${seq}`,
      now - (EVENTS - seq),
      `gdn_other${String(u).padStart(20, '0')}`,
    );
  }
})();
db.close();
const firstEvent = `evt_${key}${(1).toString(16).padStart(16, '0')}`;
const token = plantstore('token', 'create', '--user', 'reader');

const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const server: ChildProcess = spawn(
  pinned ? 'taskset' : BIN,
  [
    ...(pinned ? ['-c', '0', BIN] : []),
    'serve',
    '--port',
    String(port),
    '--database',
    `sqlite:${file}`,
    ...BENCH_SERVE_FLAGS,
  ],
  { stdio: ['ignore', 'ignore', 'inherit'] },
);
await waitReady(url, '/readyz');
// The reader's home garden, made on its first request.
await fetch(`${url}/gardens`, { headers: { authorization: `Bearer ${token}` } });

/** The server's CPU time so far (its own and its threads'), in milliseconds. */
function cpuMs(): number {
  const stat = readFileSync(`/proc/${server.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / 100;
}

const get = (path: string) =>
  new Promise<void>((ok, fail) => {
    const req = request(`${url}${path}`, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => ok());
    });
    req.on('error', fail);
    req.end();
  });

/** /healthz one at a time for SECONDS: p50 and p99 in ms, and the server's CPU share meanwhile. */
async function phase(): Promise<{ p50: number; p99: number; mean: number; n: number; cpu: number }> {
  const times: number[] = [];
  const cpu0 = cpuMs();
  const t0 = performance.now();
  while (performance.now() - t0 < SECONDS * 1000) {
    const s = performance.now();
    await get('/healthz');
    times.push(performance.now() - s);
  }
  const cpu = (cpuMs() - cpu0) / (performance.now() - t0);
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))]!;
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  return { p50: at(0.5), p99: at(0.99), mean, n: times.length, cpu };
}

// Idle: no stream open.
const idle = await phase();

// The streams, resumed from the first event; each is open (200) before the timing starts.
const aborts: AbortController[] = [];
for (let i = 0; i < STREAMS; i++) {
  const abort = new AbortController();
  const res = await fetch(`${url}/events`, {
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', 'last-event-id': firstEvent },
    signal: abort.signal,
  });
  if (res.status !== 200) throw new Error(`stream ${i}: ${res.status} ${await res.text()}`);
  (async () => {
    try {
      for await (const _ of res.body as unknown as AsyncIterable<Uint8Array>);
    } catch {}
  })();
  aborts.push(abort);
}
const open = await phase();
const later = await phase();
for (const a of aborts) a.abort();
server.kill('SIGTERM');
await new Promise((r) => server.once('exit', r));
rmSync(tmp, { recursive: true, force: true });

const ms = (x: number) => x.toFixed(2);
const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
say(
  `Resumed streams (SQLite, ${EVENTS.toLocaleString('en')} events of other users in the log; ${STREAMS} streams of a user with an empty garden, Last-Event-ID = the first event; server ${pinned ? 'on core 0, client on core 1' : 'unpinned'}; ${SECONDS} s per phase; Node ${process.version})`,
);
say('');
say('| phase | /healthz p50 | p99 | mean | requests | server CPU |');
say('|---|---:|---:|---:|---:|---:|');
for (const [name, p] of [
  ['no stream', idle],
  [`${STREAMS} resumed streams, first ${SECONDS} s`, open],
  [`${STREAMS} resumed streams, next ${SECONDS} s`, later],
] as const) {
  say(`| ${name} | ${ms(p.p50)} ms | ${ms(p.p99)} ms | ${ms(p.mean)} ms | ${p.n} | ${pct(p.cpu)} |`);
}
say('');
say(
  `/healthz p50 moved by ${ms(open.p50 - idle.p50)} ms while the streams caught up and ${ms(later.p50 - idle.p50)} ms after (target: within 2 ms of the idle figure).`,
);
if (opt.write) writeSection(join(ROOT, 'docs/benchmarks.md'), 'resumed-streams', report.join('\n'));
