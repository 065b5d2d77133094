/**
 * Moving a whole store (contract section 12; issue 38's targets): `plantstore export` and
 * `plantstore import`, run as an operator runs them (bin/plantstore, built), on a store of PLANTS
 * plants and EVENTS events (the last EVENTS plants made with their plant.created event) in 300
 * users' home gardens:
 *
 *   export from SQLite → import into PostgreSQL → export from PostgreSQL → import into SQLite
 *
 * each timed (records/s: every line of the file but header and trailer) with its peak RSS (VmHWM of
 * the command's process, read from /proc every 20 ms until it exits). Targets: each ≥ 100,000
 * records/s at the size given, and memory flat: the whole run is made again at twice the size, and
 * each step's peak there is at most 1.1 × its peak at the size given. (Against a quarter of the
 * size the imports' peaks look higher at the full size: V8 lets its old generation fill to about
 * 120 MB of promoted garbage before its first full collections, which a short run does not reach;
 * from there on the peak stays put, which is what twice the size shows.)
 *
 *   npx tsx bench/store-move.ts [--plants 1000000] [--events 100000] [--pg URL] [--write]
 *   npm run bench -- --store-move [options]    the same, after a build
 *
 * --write puts the table into docs/operations.md ("How fast"). The stores are built in-process
 * through the store's own createPlants; PostgreSQL databases are made and dropped by the script.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { gardenId } from '../src/gardens/id.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import type { NewPlant } from '../src/store/store.js';
import { BENCH_PG, pgDatabase } from './ports.js';
import { writeSection } from './report.js';

const { values: opt } = parseArgs({
  options: {
    plants: { type: 'string', default: '1000000' },
    events: { type: 'string', default: '100000' },
    write: { type: 'boolean', default: false },
    pg: { type: 'string', default: BENCH_PG },
  },
});
const BIN = join(import.meta.dirname, '..', 'bin', 'plantstore');
const USERS = 300;

async function build(path: string, plants: number, events: number): Promise<void> {
  const store = new SqliteStore({ path, durability: 'normal' });
  await store.migrate();
  const homes: string[] = [];
  for (let u = 0; u < USERS; u++) {
    homes.push(
      (await store.homeGarden(`user${u}`, { id: gardenId(randomBytes), name: 'Home', at: new Date() })).id,
    );
  }
  const words = [
    'Monstera',
    'deliciosa',
    'Ficus',
    'lyrata',
    'Calathea',
    'orbifolia',
    'Pothos',
    'Aloë',
    'vera',
    'Fern',
  ];
  for (let from = 0; from < plants; from += 1000) {
    const batch: NewPlant[] = [];
    for (let i = from; i < Math.min(from + 1000, plants); i++) {
      const u = i % USERS;
      batch.push({
        id: null,
        owner: `user${u}`,
        garden: homes[u]!,
        admin: true,
        name: `${words[i % 10]} ${words[(i * 7) % 10]} ${i}`,
        tag: i % 4 === 0 ? 'indoor' : null,
      });
    }
    const withEvents = from + batch.length > plants - events;
    const r = await store.createPlants(batch, undefined, withEvents ? { at: new Date() } : undefined);
    if ('refused' in r) throw new Error(`createPlants: ${JSON.stringify(r)}`);
  }
  await store.close();
}

interface Step {
  what: string;
  seconds: number;
  records: number;
  peakMb: number;
}

/** Runs `plantstore ARGS` with DATABASE_URL `db`; its time and peak RSS. */
function run(args: string[], db: string): Promise<{ seconds: number; peakMb: number }> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const child = spawn(BIN, args, {
      env: { ...process.env, DATABASE_URL: db },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (d) => {
      stderr += d;
    });
    let peak = 0;
    const sample = setInterval(() => {
      try {
        const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
        if (m) peak = Math.max(peak, Number(m[1]));
      } catch {
        // exited between samples
      }
    }, 20);
    child.on('exit', (code) => {
      clearInterval(sample);
      const seconds = (performance.now() - start) / 1000;
      if (code !== 0) reject(new Error(`plantstore ${args.join(' ')}: exit ${code}: ${stderr}`));
      else resolve({ seconds, peakMb: peak / 1024 });
    });
  });
}

async function move(plants: number, events: number): Promise<Step[]> {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-move-'));
  const db = await pgDatabase(opt.pg!, 'plantstore_move');
  try {
    const source = join(dir, 'source.db');
    const t0 = performance.now();
    await build(source, plants, events);
    console.log(
      `  built ${plants} plants and ${events} events in ${((performance.now() - t0) / 1000).toFixed(0)} s`,
    );
    const records = (file: string) => {
      // Every line but header and trailer: the records.
      const text = readFileSync(file, 'utf8');
      let n = 0;
      for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) n++;
      return n - 2;
    };
    const steps: Step[] = [];
    const step = async (what: string, args: string[], url: string, file: string) => {
      const r = await run(args, url);
      const s = { what, ...r, records: records(file) };
      console.log(
        `  ${what}: ${s.records} records in ${r.seconds.toFixed(2)} s, ${Math.round(s.records / r.seconds)} records/s, peak RSS ${r.peakMb.toFixed(0)} MB`,
      );
      steps.push(s);
    };
    const a = join(dir, 'a.ndjson');
    const b = join(dir, 'b.ndjson');
    await step('export, SQLite', ['export', '--to', a], `sqlite:${source}`, a);
    await step('import into PostgreSQL', ['import', a], db.url, a);
    await step('export, PostgreSQL', ['export', '--to', b], db.url, b);
    await step('import into SQLite', ['import', b], `sqlite:${join(dir, 'target.db')}`, b);
    console.log(`  file: ${(statSync(a).size / 1024 / 1024).toFixed(0)} MB`);
    return steps;
  } finally {
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const PLANTS = Number(opt.plants);
const EVENTS = Number(opt.events);
const commit = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim() || '?';
console.log(
  `store move: ${PLANTS} plants + ${EVENTS} events, and twice that; load average ${loadavg()[0]!.toFixed(2)}`,
);
console.log('the size given:');
const full = await move(PLANTS, EVENTS);
console.log('twice the size:');
const double = await move(PLANTS * 2, EVENTS * 2);

const rows = full.map((s, i) => {
  const rate = Math.round(s.records / s.seconds);
  const d = double[i]!;
  const flat = d.peakMb <= 1.1 * s.peakMb;
  return `| ${s.what} | ${rate.toLocaleString('en')} | ${Math.round(d.records / d.seconds).toLocaleString('en')} | ${s.peakMb.toFixed(0)} / ${d.peakMb.toFixed(0)} MB | ${rate >= 100_000 && flat ? 'yes' : 'no'} |`;
});
const table = [
  `${PLANTS.toLocaleString('en')} plants and ${EVENTS.toLocaleString('en')} events (${full[0]!.records.toLocaleString('en')} records), and twice that (${double[0]!.records.toLocaleString('en')}); bin/plantstore as built, one run each. Targets: ≥ 100,000 records/s a step at the size given, and peak RSS at twice the size ≤ 1.1 × at the size given. Load average at the end ${loadavg()[0]!.toFixed(2)}; tree ${commit}.`,
  '',
  '| step | records/s | records/s, twice the size | peak RSS, size given / twice | met |',
  '|---|---:|---:|---|---|',
  ...rows,
].join('\n');
console.log(`\n${table}`);
if (opt.write) writeSection(join(import.meta.dirname, '..', 'docs', 'operations.md'), 'store-move', table);
