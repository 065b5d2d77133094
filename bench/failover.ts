/**
 * Losing the PostgreSQL primary (contract section 6; issue 39's target): a primary and a
 * synchronous streaming standby made with the machine's PostgreSQL 15 binaries
 * (test/helpers/pg-cluster.ts), two `bin/plantstore serve` instances on a DATABASE_URL naming both
 * hosts, and WRITERS clients (half on each instance) creating plants and changing or deleting
 * plants they made. After SETTLE seconds the primary is killed (kill -9 of the postmaster and its
 * backends) and the standby promoted (`pg_ctl promote`); the writers go on for AFTER seconds.
 *
 * Reported: every answer by status (the target: only 2xx and 503), the writes acknowledged before
 * and after, how long after the promotion finished each instance answered 2xx again (target
 * ≤ 2 s), and every acknowledged write looked up on the new primary (target: none lost; a plant
 * whose last request got no answer or a 503 may be either way, and is not counted).
 *
 *   npx tsx bench/failover.ts [--writers 20] [--settle 5] [--after 10] [--write]
 *   npm run bench -- --failover [options]       the same, after a build
 *
 * Beside them, an owner adds, changes and removes 10 members of a garden, and a watcher's writer
 * creates plants that a webhook endpoint of the watcher's receives (a receiver on 127.0.0.1): every
 * acknowledged membership is checked on the new primary, and every acknowledged create of the
 * watcher's must reach the receiver.
 *
 * --write puts the table into docs/scale-out.md ("Failover, measured"). Run as root (the clusters
 * run as the postgres user).
 */
import { spawn, spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { primaryAndStandby } from '../test/helpers/pg-cluster.js';
import { startReceiver } from '../test/helpers/receiver.js';
import { BENCH_SERVE_FLAGS, freePort, waitReady } from './ports.js';
import { writeSection } from './report.js';

const { values: opt } = parseArgs({
  options: {
    writers: { type: 'string', default: '20' },
    settle: { type: 'string', default: '5' },
    after: { type: 'string', default: '10' },
    write: { type: 'boolean', default: false },
  },
});
const WRITERS = Number(opt.writers);
const BIN = join(import.meta.dirname, '..', 'bin', 'plantstore');

const ha = await primaryAndStandby();
const url = `postgres://postgres@127.0.0.1:${ha.primary.port},127.0.0.1:${ha.standby.port}/postgres`;
const env = {
  ...process.env,
  DATABASE_URL: url,
  WEBHOOK_ALLOW_PRIVATE: 'true',
  WEBHOOK_RETRY_SCHEDULE: '200ms,500ms,1s,1s,1s,1s,1s,1s,1s,1s',
};
const receiver = await startReceiver();
const token = spawnSync(BIN, ['token', 'create', '--user', 'writer'], {
  env,
  encoding: 'utf8',
}).stdout.trim();
const instances: { child: ReturnType<typeof spawn>; base: string; back: number | null }[] = [];
for (let i = 0; i < 2; i++) {
  const port = await freePort();
  const child = spawn(BIN, ['serve', '--port', String(port), ...BENCH_SERVE_FLAGS], { env, stdio: 'ignore' });
  instances.push({ child, base: `http://127.0.0.1:${port}`, back: null as number | null });
  await waitReady(`http://127.0.0.1:${port}`, '/readyz');
}

// Membership changes: an owner adding, changing and removing 10 users in a garden of its own. And a
// watcher whose plants (made by a writer of their own) go to a webhook endpoint.
const tokenOf = (user: string) =>
  spawnSync(BIN, ['token', 'create', '--user', user], { env, encoding: 'utf8' }).stdout.trim();
const owner = tokenOf('gardener');
const watcher = tokenOf('watcher');
const made = await fetch(`${instances[0]!.base}/gardens`, {
  method: 'POST',
  headers: { authorization: `Bearer ${owner}`, 'content-type': 'application/json' },
  body: JSON.stringify({ name: 'Shared' }),
});
const garden = ((await made.json()) as { id: string }).id;
const hook = await fetch(`${instances[0]!.base}/webhooks`, {
  method: 'POST',
  headers: { authorization: `Bearer ${watcher}`, 'content-type': 'application/json' },
  body: JSON.stringify({ url: `${receiver.url}/hook`, events: ['plant.created'] }),
});
if (hook.status !== 201) throw new Error(`webhook: ${hook.status} ${await hook.text()}`);

type Op = 'create' | 'change' | 'delete';
interface Known {
  /** The plant's name as its last acknowledged write left it; null: deleted. */
  name: string | null;
  /** A later write got no answer or a 503: it may or may not have been applied. */
  unsure: boolean;
}
const known = new Map<number, Known>();
const statuses = new Map<string, number>();
const acked = { before: { create: 0, change: 0, delete: 0 }, after: { create: 0, change: 0, delete: 0 } };
let phase: 'before' | 'after' = 'before';
let promotedAt = 0;
let stop = false;

async function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  extra: Record<string, string> = {},
  as = token,
) {
  try {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${as}`,
        ...extra,
        ...(body
          ? { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }
          : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    await res.arrayBuffer();
    return { status: String(res.status), location: res.headers.get('location') };
  } catch (err) {
    return { status: `no answer (${(err as Error).name})`, location: null };
  }
}

async function writer(w: number) {
  const inst = instances[w % 2]!;
  const mine: number[] = [];
  for (let n = 0; !stop; n++) {
    const op: Op =
      n % 5 === 3 && mine.length > 0 ? 'change' : n % 5 === 4 && mine.length > 0 ? 'delete' : 'create';
    let r: { status: string; location: string | null };
    let id: number | undefined;
    const name = `w${w}-${n}`;
    if (op === 'create') {
      r = await call(inst.base, 'POST', '/plants', { name }, { 'idempotency-key': name });
      if (r.status === '201') {
        id = Number(r.location!.split('/').pop());
        mine.push(id);
        known.set(id, { name, unsure: false });
      }
    } else {
      id = mine[Math.floor((n * 7919) % mine.length)]!;
      r =
        op === 'change'
          ? await call(inst.base, 'PATCH', `/plants/${id}`, { name }, { 'if-match': '*' })
          : await call(inst.base, 'DELETE', `/plants/${id}`);
      const k = known.get(id)!;
      if (r.status === '200' || r.status === '204') {
        known.set(id, { name: op === 'change' ? name : null, unsure: false });
        if (op === 'delete') mine.splice(mine.indexOf(id), 1);
      } else if (r.status !== '404') {
        k.unsure = true;
      }
    }
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    if (/^2/.test(r.status)) {
      acked[phase][op]++;
      if (phase === 'after' && inst.back === null) inst.back = performance.now() - promotedAt;
    }
  }
}

// The garden's members as the last acknowledged change left them (null: not a member), unless a
// later change got no answer or a 503.
const members = new Map<string, { role: string | null; unsure: boolean }>();
const memberAcks = { ok: 0, failed: 0 };
async function gardener() {
  const roles = ['viewer', 'editor', null];
  for (let n = 0; !stop; n++) {
    const u = `member${n % 10}`;
    const role = roles[Math.floor(n / 10) % 3]!;
    const r =
      role === null
        ? await call(instances[1]!.base, 'DELETE', `/gardens/${garden}/members/${u}`, undefined, {}, owner)
        : await call(instances[1]!.base, 'PUT', `/gardens/${garden}/members/${u}`, { role }, {}, owner);
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    if (/^2/.test(r.status) || (role === null && r.status === '404')) {
      members.set(u, { role, unsure: false });
      memberAcks.ok++;
    } else {
      members.set(u, { role: members.get(u)?.role ?? null, unsure: true });
      memberAcks.failed++;
    }
  }
}
// The watcher's acknowledged creates, each to reach the receiver.
const watched: string[] = [];
async function watchedWriter() {
  for (let n = 0; !stop; n++) {
    const name = `watched-${n}`;
    const r = await call(
      instances[n % 2]!.base,
      'POST',
      '/plants',
      { name },
      { 'idempotency-key': name },
      watcher,
    );
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    if (r.status === '201') watched.push(name);
  }
}

const started = loadavg()[0]!;
const writers = [...Array.from({ length: WRITERS }, (_, w) => writer(w)), gardener(), watchedWriter()];
await new Promise((r) => setTimeout(r, Number(opt.settle) * 1000));
const killAt = performance.now();
await ha.primary.kill9();
await ha.standby.promote();
promotedAt = performance.now();
phase = 'after';
await new Promise((r) => setTimeout(r, Number(opt.after) * 1000));
stop = true;
await Promise.all(writers);

// Every acknowledged write, looked up on the new primary.
const rows = await ha.standby.query<{ id: number; name: string }>('SELECT id, name FROM plants');
const stored = new Map(rows.map((r) => [Number(r.id), r.name]));
let checked = 0;
let lost = 0;
for (const [id, k] of known) {
  if (k.unsure) continue;
  checked++;
  if ((stored.get(id) ?? null) !== k.name) lost++;
}
const memberRows = await ha.standby.query<{ user_id: string; role: string }>(
  `SELECT user_id, role FROM garden_members WHERE garden_id = '${garden}' AND user_id LIKE 'member%'`,
);
const roleNow = new Map(memberRows.map((r) => [r.user_id, r.role]));
let membersLost = 0;
let membersChecked = 0;
for (const [u, k] of members) {
  if (k.unsure) continue;
  membersChecked++;
  if ((roleNow.get(u) ?? null) !== k.role) membersLost++;
}
// Every acknowledged create of the watcher's is delivered (at least once), from either instance.
const deliveredBy = performance.now() + 30_000;
const undelivered = () => {
  const got = new Set(
    receiver.received.map((d) => (JSON.parse(d.body) as { data: { name: string } }).data.name),
  );
  return watched.filter((n) => !got.has(n));
};
while (undelivered().length > 0 && performance.now() < deliveredBy)
  await new Promise((r) => setTimeout(r, 100));
const notDelivered = undelivered().length;
for (const i of instances) i.child.kill('SIGTERM');
await ha.close();
await receiver.close();

const answers = [...statuses]
  .sort()
  .map(([s, n]) => `${s}: ${n.toLocaleString('en')}`)
  .join(', ');
const onlyOk = [...statuses.keys()].every((s) => /^2/.test(s) || s === '503');
const backs = instances.map((i) => (i.back === null ? 'never' : `${(i.back / 1000).toFixed(2)} s`));
const table = [
  `Two \`serve\` instances, ${WRITERS} writers (half on each), a primary and a synchronous standby on this machine; the primary killed after ${opt.settle} s, the standby promoted (${((promotedAt - killAt) / 1000).toFixed(2)} s from the kill to the end of \`pg_ctl promote\`), ${opt.after} s more. Load average ${started.toFixed(2)} at the start. \`npx tsx bench/failover.ts\`.`,
  '',
  '| | measured | target | met |',
  '|---|---|---|---|',
  `| answers | ${answers} | only 2xx and 503 | ${onlyOk ? 'yes' : 'no'} |`,
  `| acknowledged before the kill | ${acked.before.create} creates, ${acked.before.change} changes, ${acked.before.delete} deletes | | |`,
  `| acknowledged after the promotion | ${acked.after.create} creates, ${acked.after.change} changes, ${acked.after.delete} deletes | | |`,
  `| acknowledged plant writes lost | ${lost} of ${checked} plants checked on the new primary | 0 | ${lost === 0 ? 'yes' : 'no'} |`,
  `| membership changes (one owner, 10 users: added, role changed, removed) | ${memberAcks.ok} acknowledged, ${memberAcks.failed} not; ${membersLost} of ${membersChecked} members' last acknowledged role not on the new primary | 0 lost | ${membersLost === 0 ? 'yes' : 'no'} |`,
  `| webhook deliveries of a watcher's ${watched.length} acknowledged creates | ${watched.length - notDelivered} delivered within 30 s of the end, ${notDelivered} not | all | ${notDelivered === 0 ? 'yes' : 'no'} |`,
  `| first 2xx after the promotion, each instance | ${backs.join(', ')} | ≤ 2 s | ${instances.every((i) => i.back !== null && i.back <= 2000) ? 'yes' : 'no'} |`,
].join('\n');
console.log(table);
if (opt.write) writeSection(join(import.meta.dirname, '..', 'docs', 'scale-out.md'), 'failover', table);
