/**
 * Creates at a fixed rate through the SQLite store itself (no HTTP), each timed from the call to
 * its durable answer: what a create waits for in the writer, FTS5's merges of the search index
 * above all (src/store/sqlite/search-merge.ts). A fresh store of SEED plants (default 100,000, made
 * 200 at a time) in DIR, then RATE creates a second for SECONDS, each its own call; it prints
 * p50 / p99 / p99.9 / longest, the process's CPU per create (the writer thread included), the
 * index's segments level by level afterwards (merging:count) and a search's time on them.
 *
 *   npx tsx bench/create-tail.ts paced|automerge [DIR=/tmp] [RATE=500] [SECONDS=20]
 *
 * `paced` is the default way (the writer's paced steps, FTS5's automerge off), `automerge` FTS5's
 * own merges inside the commits. With `paced`, the steps still due after the build run before the
 * creates are timed (SETTLE=0: not waited for). DIR /dev/shm (a tmpfs) leaves out the disk's fsync. The machine
 * is small and shared: run each more than once, alternating.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { pacedWanted, searchLevels } from '../src/store/sqlite/search-merge.js';
import { SqliteStore } from '../src/store/sqlite/store.js';

const mode = process.argv[2];
if (mode !== 'paced' && mode !== 'automerge')
  throw new Error('usage: create-tail.ts paced|automerge [DIR] [RATE] [SECONDS]');
const dir = mkdtempSync(join(process.argv[3] ?? '/tmp', 'plantstore-create-tail-'));
const rate = Number(process.argv[4] ?? 500);
const seconds = Number(process.argv[5] ?? 20);
const SEED = Number(process.env.SEED ?? 100_000);
const path = join(dir, 'plants.db');
// The quiet merger kept out of it (an hour without writes): only the merges made while writing.
const store = new SqliteStore({ path, durability: 'full', searchMerge: mode, searchMergeQuietMs: 3_600_000 });
await store.migrate();
const garden = (await store.homeGarden('u', { id: 'gdn_create_tail', name: 'Home', at: new Date() })).id;
const WORDS = [
  'Monstera',
  'deliciosa',
  'Ficus',
  'Café',
  'rose',
  'fern',
  'aloe',
  'pilea',
  'calathea',
  'thai',
  'basil',
  'mint',
];
let k = 0;
const create = () => {
  k++;
  const name = `${WORDS[k % 12]} ${WORDS[(k * 7) % 12]} ${WORDS[(k * 5) % 11]} ${k}`;
  return store.createPlant({ id: null, owner: 'u', garden, name, tag: null }, undefined, {
    at: new Date(),
    actor: 'u',
    requestId: randomUUID(),
  });
};
let made = 0;
await Promise.all(
  Array.from({ length: 200 }, async () => {
    while (made++ < SEED) await create();
  }),
);

// Paced steps go on after the build while a level holds 4 segments or a merge is under way
// (FTS5's automerge made those merges during the build): wait for them, so that the run's CPU is
// its own creates' (SETTLE=0 leaves them in).
const look = new Database(path, { readonly: true });
const structure = look.prepare('SELECT block FROM plant_search_data WHERE id = 10').pluck();
const levelsNow = () => searchLevels(structure.get() as Buffer);
if (mode === 'paced' && process.env.SETTLE !== '0') {
  const settleStart = performance.now();
  while (pacedWanted(levelsNow())) {
    if (performance.now() - settleStart > 120_000)
      throw new Error('the paced merges did not settle in 120 s');
    await new Promise((r) => setTimeout(r, 50));
  }
  console.error(`paced merges after the build settled in ${(performance.now() - settleStart).toFixed(0)} ms`);
}

const times: number[] = [];
const cpu = process.cpuUsage();
const start = performance.now();
const calls: Promise<void>[] = [];
for (let i = 0; i < rate * seconds; i++) {
  const due = start + (i * 1000) / rate;
  const wait = due - performance.now();
  if (wait > 1) await new Promise((r) => setTimeout(r, wait));
  const sent = performance.now();
  calls.push(create().then(() => void times.push(performance.now() - sent)));
}
await Promise.all(calls);
const used = process.cpuUsage(cpu);
times.sort((a, b) => a - b);
const at = (p: number) => times[Math.min(times.length - 1, Math.floor(p * times.length))]!.toFixed(2);

const levels = levelsNow();
const search = look.prepare("SELECT count(*) FROM plant_search WHERE plant_search MATCH 'mon*'");
const t = performance.now();
for (let i = 0; i < 200; i++) search.get();
const searchMs = ((performance.now() - t) / 200).toFixed(2);
console.log(
  JSON.stringify({
    mode,
    dir: process.argv[3] ?? '/tmp',
    rate,
    creates: times.length,
    p50: at(0.5),
    p99: at(0.99),
    p999: at(0.999),
    longest: times.at(-1)!.toFixed(2),
    cpuMicrosPerCreate: Number(((used.user + used.system) / times.length).toFixed(1)),
    levels: levels.map((l) => `${l.merging}:${l.pages.length}`).join(' '),
    searchMs,
  }),
);
look.close();
await store.close();
rmSync(dir, { recursive: true, force: true });
