/**
 * The mixed workload (issue 16): many users, random page sizes and tags, deep pages reached by
 * following real `Link` headers, reads and creates mixed in — against plantstore on SQLite (full
 * durability, events on, no webhook endpoint) and the node:http ceiling, in interleaved rounds,
 * each server alone on core 0 (the other SIGSTOPped), wrk on core 1.
 *
 *   npx tsx bench/mixed.ts [--users 100] [--per-user 1000] [--rounds 3] [--duration 5]
 *                          [--connections 50] [--mix list:36,deep:24,read:25,create:15 --mix create:100]
 *
 * Classes: `list` a first page (limit 10–100, half of them with one of 20 tags), `deep` a later
 * page (a path taken from a real `Link` header, 1–8 pages in), `read` one of the user's plants,
 * `create` a plant. Every request carries its user's token. Per-class latency comes from
 * bench/mixed.lua (each request's X-Request-Id carries its class and send time).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { openStore } from '../src/store/index.js';
import { createToken } from '../src/tokens/tokens.js';
import { freePort, waitReady } from './ports.js';

const { values: opt } = parseArgs({
  options: {
    users: { type: 'string', default: '100' },
    'per-user': { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '3' },
    duration: { type: 'string', default: '5' },
    connections: { type: 'string', default: '50' },
    mix: { type: 'string', multiple: true, default: ['list:36,deep:24,read:25,create:15', 'create:100'] },
    // Writes the server's CPU profile (--cpu-prof) into this folder.
    profile: { type: 'string' },
  },
});
const USERS = Number(opt.users);
const PER_USER = Number(opt['per-user']);
const TAGS = 20;
const ROOT = resolve(import.meta.dirname, '..');
const tmp = mkdtempSync(join(tmpdir(), 'plantstore-mixed-'));
const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const c of children) {
    c.kill('SIGCONT');
    c.kill('SIGKILL');
  }
  rmSync(tmp, { recursive: true, force: true });
});

// A deterministic generator, so that every run draws the same pool.
let state = 20261122;
const rand = () => {
  state = (state * 1103515245 + 12345) % 2 ** 31;
  return state / 2 ** 31;
};
const tagOf = (i: number) => (i % 2 === 0 ? `tag-${(i >> 1) % TAGS}` : null);

// The store: USERS × PER_USER plants, ids interleaved across users as real traffic makes them.
const dbPath = join(tmp, 'plants.db');
const store = await openStore({ url: `sqlite:${dbPath}`, durability: 'full', poolSize: 1 });
await store.migrate();
const tokens: string[] = [];
for (let u = 0; u < USERS; u++) {
  tokens.push(
    (
      await createToken(store, {
        user: `user-${u}`,
        scopes: ['plants:read', 'plants:write'],
        name: null,
        expiresInMs: null,
      })
    ).secret,
  );
}
await store.close();
{
  const db = new Database(dbPath);
  const insert = db.prepare('INSERT INTO plants (owner, name, tag) VALUES (?, ?, ?)');
  db.transaction(() => {
    for (let i = 0; i < USERS * PER_USER; i++)
      insert.run(`user-${i % USERS}`, `plant ${i}`, tagOf(Math.floor(i / USERS)));
  })();
  db.close();
}
console.error(`seeded ${USERS} users × ${PER_USER} plants`);

// plantstore and the ceiling, each pinned to core 0, stopped while the other is measured.
const port = await freePort();
const ps = spawn(
  'taskset',
  [
    '-c',
    '0',
    process.execPath,
    ...(opt.profile ? ['--cpu-prof', `--cpu-prof-dir=${resolve(opt.profile)}`] : []),
    join(ROOT, 'bin/plantstore'),
    'serve',
    '--port',
    String(port),
    '--log-level',
    'warn',
    '--rate-limit',
    '0',
    '--auth-failure-limit',
    '0',
  ],
  { env: { ...process.env, DATABASE_URL: `sqlite:${dbPath}` }, stdio: 'inherit' },
);
children.push(ps);
const plantstore = `http://127.0.0.1:${port}`;
const cport = await freePort();
const ceil = spawn('taskset', ['-c', '0', process.execPath, join(ROOT, 'bench/ceiling.mjs'), String(cport)], {
  stdio: 'inherit',
});
children.push(ceil);
const ceiling = `http://127.0.0.1:${cport}`;
await waitReady(plantstore, '/readyz');
await waitReady(ceiling, '/healthz'); // the ceiling answers any GET

// The pool of real requests, drawn before the run.
const db = new Database(dbPath, { readonly: true });
const idsOf = db.prepare('SELECT id FROM plants WHERE owner = ? ORDER BY random() LIMIT 20').pluck();
const lines: string[] = [];
for (let u = 0; u < USERS; u++) {
  const token = tokens[u]!;
  for (const id of idsOf.all(`user-${u}`) as number[]) lines.push(`read\tGET\t/plants/${id}\t${token}\t`);
  for (let k = 0; k < 10; k++) {
    const limit = 10 + Math.floor(rand() * 91);
    const tag = rand() < 0.5 ? `&tag=tag-${Math.floor(rand() * TAGS)}` : '';
    const first = `/plants?limit=${limit}${tag}`;
    lines.push(`list\tGET\t${first}\t${token}\t`);
    // Deep pages: follow the real Link headers 1–8 pages in.
    let next: string | null = first;
    for (let depth = 0, stop = 1 + Math.floor(rand() * 8); depth < stop && next; depth++) {
      const res: Response = await fetch(`${plantstore}${next}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      await res.arrayBuffer();
      next = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1] ?? null;
      if (next) lines.push(`deep\tGET\t${next}\t${token}\t`);
    }
  }
  for (let k = 0; k < 5; k++) {
    const t = rand() < 0.5 ? `,"tag":"tag-${Math.floor(rand() * TAGS)}"` : '';
    lines.push(`create\tPOST\t/plants\t${token}\t{"name":"mixed ${u}-${k}"${t}}`);
  }
}
db.close();
const poolFile = join(tmp, 'pool.tsv');
writeFileSync(poolFile, `${lines.join('\n')}\n`);
console.error(
  `pool: ${lines.length} requests (${lines.filter((l) => l.startsWith('deep')).length} deep pages)`,
);

interface Run {
  rps: number;
  p50: number;
  p99: number;
  classes: Record<string, { n: number; p50_us: number; p99_us: number }>;
  statuses: Record<string, number>;
}

function wrk(url: string, mix: string, seconds: number): Run {
  const out = execFileSync(
    'taskset',
    [
      '-c',
      '1',
      'wrk',
      '-t1',
      `-c${opt.connections}`,
      `-d${seconds}s`,
      '--timeout',
      '10s',
      '-s',
      join(ROOT, 'bench/mixed.lua'),
      url,
    ],
    { env: { ...process.env, MIXED_POOL: poolFile, MIXED_MIX: mix }, encoding: 'utf8', maxBuffer: 1 << 26 },
  );
  const line = out.split('\n').find((l) => l.startsWith('MIXED '));
  if (!line) throw new Error(`wrk printed no result: ${out}`);
  const r = JSON.parse(line.slice(6));
  if (r.errors > 0) throw new Error(`${url}: ${r.errors} socket errors`);
  return {
    rps: r.requests / (r.duration_us / 1e6),
    p50: r.p50_us / 1000,
    p99: r.p99_us / 1000,
    classes: r.classes,
    statuses: r.statuses,
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
/** Runs `fn` with the other server stopped, so that it does no housekeeping on the pinned core. */
const measured = (other: ChildProcess, fn: () => Run): Run => {
  other.kill('SIGSTOP');
  try {
    return fn();
  } finally {
    other.kill('SIGCONT');
  }
};

console.log(
  '| workload | plantstore req/s | ceiling req/s | ratio | p50 | p99 | per class: p50 / p99 (ms) |',
);
console.log('|---|---|---|---|---|---|---|');
for (const mix of opt.mix!) {
  measured(ceil, () => wrk(plantstore, mix, 2)); // warm-up
  const ours: Run[] = [];
  const theirs: Run[] = [];
  for (let round = 0; round < Number(opt.rounds); round++) {
    const order = round % 2 ? ['ceiling', 'plantstore'] : ['plantstore', 'ceiling'];
    for (const who of order) {
      if (who === 'plantstore') ours.push(measured(ceil, () => wrk(plantstore, mix, Number(opt.duration))));
      else theirs.push(measured(ps, () => wrk(ceiling, mix, Number(opt.duration))));
    }
    const last = ours[ours.length - 1]!;
    const bad = Object.entries(last.statuses).filter(([k]) => !/:(200|201)$/.test(k));
    if (bad.length) throw new Error(`plantstore answered ${JSON.stringify(bad)}`);
    console.error(
      `${mix} round ${round + 1}: plantstore ${last.rps.toFixed(0)} req/s, ceiling ${theirs[theirs.length - 1]!.rps.toFixed(0)}`,
    );
  }
  const rps = median(ours.map((r) => r.rps));
  const crps = median(theirs.map((r) => r.rps));
  const classes = Object.keys(ours[0]!.classes).sort();
  const per = classes
    .map(
      (c) =>
        `${c} ${median(ours.map((r) => r.classes[c]!.p50_us / 1000)).toFixed(1)} / ${median(ours.map((r) => r.classes[c]!.p99_us / 1000)).toFixed(1)}`,
    )
    .join(', ');
  console.log(
    `| ${mix} | ${rps.toFixed(0)} | ${crps.toFixed(0)} | ${(rps / crps).toFixed(2)} | ${median(ours.map((r) => r.p50)).toFixed(2)} ms | ${median(ours.map((r) => r.p99)).toFixed(2)} ms | ${per} |`,
  );
}
// A clean stop, so that a profile is written.
ceil.kill('SIGCONT');
ps.kill('SIGCONT');
ps.kill('SIGTERM');
const [code, signal] = await new Promise<[number | null, string | null]>((r) =>
  ps.once('exit', (c, s) => r([c, s])),
);
if (opt.profile) console.error(`server exited: ${code ?? signal}`);
process.exit(0);
