/**
 * What the search index's merge while writes are quiet (src/store/sqlite/search-merge.ts) costs on
 * a large store, without HTTP: a store of N plants (default 1,000,000; 100 users, a home garden
 * each) is built once into .tmp/ and its index merged into one segment, as a store at rest; then,
 * on a copy opened by the checkout given, W creates one commit each (default 50), and the process's
 * CPU (the writer thread's included) from the last create until the index's structure record has
 * not changed for 3 s: the merge work. Then the index's segment count, and the median µs of 200
 * searches for `mon` in 3 gardens (a page of 20). A 5th argument repeats the creates and the quiet
 * spell that many times (the last round's figures, and each round's merge CPU and segments). Run it against two checkouts to compare:
 *
 *   mkdir /tmp/before && git archive <commit> | tar -x -C /tmp/before && ln -s "$PWD/node_modules" /tmp/before/node_modules
 *   npx tsx bench/search-merge-cost.ts /tmp/before 50 && npx tsx bench/search-merge-cost.ts . 50
 *   npx tsx bench/search-merge-cost.ts . 1000 1000000 10   # 10 rounds of 1,000 creates
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { searchLevels } from '../src/store/sqlite/search-merge.js';

const root = resolve(process.argv[2] ?? '.');
const WRITES = Number(process.argv[3] ?? 50);
const PLANTS = Number(process.argv[4] ?? 1_000_000);
const ROUNDS = Number(process.argv[5] ?? 1);
const USERS = 100;
const here = resolve(import.meta.dirname, '..');
const { SqliteStore } = await import(join(root, 'src/store/sqlite/store.ts'));
const GENERA = ['monstera', 'cactus', 'ficus', 'pothos', 'aloe', 'begonia', 'calathea', 'dracaena'];
const name = (i: number) =>
  `${GENERA[i % GENERA.length]} ${['deliciosa', 'minor', 'alba', 'lyrata'][i % 4]} ${i % 997}`;

const cached = join(here, '.tmp', `search-merge-cost-${PLANTS}-v1.db`);
if (!existsSync(cached)) {
  mkdirSync(join(here, '.tmp'), { recursive: true });
  const building = `${cached}.building`;
  for (const f of [building, `${building}-wal`, `${building}-shm`]) rmSync(f, { force: true });
  const { SqliteStore: Built } = await import(join(here, 'src/store/sqlite/store.ts'));
  const store = new Built({ path: building, durability: 'normal', searchMergeQuietMs: 3_600_000 });
  await store.migrate();
  const gardens: string[] = [];
  for (let u = 0; u < USERS; u++)
    gardens.push(
      (await store.homeGarden(`u${u}`, { id: `gdn_merge_${u}`, name: 'Home', at: new Date() })).id,
    );
  const start = performance.now();
  for (let k = 0; k < PLANTS; k += 1000)
    await store.createPlants(
      Array.from({ length: Math.min(1000, PLANTS - k) }, (_, j) => {
        const i = k + j;
        return {
          id: null,
          owner: `u${i % USERS}`,
          garden: gardens[i % USERS]!,
          admin: true,
          name: name(i),
          tag: null,
        };
      }),
    );
  await store.close();
  const db = new Database(building);
  db.exec(`INSERT INTO plant_search (plant_search) VALUES ('optimize')`);
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
  process.stderr.write(`built ${PLANTS} plants in ${((performance.now() - start) / 1000).toFixed(0)} s\n`);
  renameSync(building, cached);
}

const dir = mkdtempSync(join(tmpdir(), 'plantstore-merge-cost-'));
const path = join(dir, 'plants.db');
copyFileSync(cached, path);
const look = new Database(path, { readonly: true });
const structure = () =>
  look.prepare('SELECT block FROM plant_search_data WHERE id = 10').pluck().get() as Buffer;
/** The structure record's segment count (its second varint, after the cookie and the V2 marker). */
const segments = () => {
  const b = structure();
  let i = b[4] === 0xff ? 8 : 4;
  const varint = () => {
    let v = 0;
    for (;;) {
      const x = b[i++]!;
      v = v * 128 + (x & 0x7f);
      if (x < 0x80) return v;
    }
  };
  varint();
  return varint();
};
const load = [loadavg()[0]!.toFixed(2)];
const store = new SqliteStore({ path, durability: 'normal', searchMergeQuietMs: 500 });
await store.migrate();
const segmentsBefore = segments();
const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
/** ROUNDS rounds of WRITES creates, each followed by the quiet spell's merge: the CPU and segments of each. */
const rounds: { mergeCpuMs: number; segments: number }[] = [];
let createsMs = 0;
let segmentsAfterCreates = 0;
let mergeMs = 0;
let quietS = 0;
for (let round = 0; round < ROUNDS; round++) {
  let c0 = cpu();
  for (let w = 0; w < WRITES; w++)
    await store.createPlants([
      {
        id: null,
        owner: `u${w % USERS}`,
        garden: `gdn_merge_${w % USERS}`,
        admin: true,
        name: name(round * WRITES + w),
        tag: null,
      },
    ]);
  createsMs = cpu() - c0;
  segmentsAfterCreates = segments();
  c0 = cpu();
  const t0 = performance.now();
  let last = structure();
  let still = performance.now();
  while (performance.now() - still < 3000) {
    await new Promise((r) => setTimeout(r, 100));
    const now = structure();
    if (!now.equals(last)) {
      last = now;
      still = performance.now();
    }
  }
  mergeMs = cpu() - c0;
  quietS = (still - t0) / 1000;
  rounds.push({ mergeCpuMs: Math.round(mergeMs), segments: segments() });
}
const times: number[] = [];
for (let k = 0; k < 200; k++) {
  const s = performance.now();
  await store.listPlants({
    gardens: ['gdn_merge_0', 'gdn_merge_1', 'gdn_merge_2'],
    tag: null,
    afterId: 0,
    limit: 20,
    terms: ['mon'],
  });
  times.push(performance.now() - s);
}
times.sort((a, b) => a - b);
load.push(loadavg()[0]!.toFixed(2));
console.log(
  JSON.stringify({
    root,
    plants: PLANTS,
    writes: WRITES,
    createsCpuMs: Math.round(createsMs),
    segmentsBefore,
    segmentsAfterCreates,
    mergeCpuMs: Math.round(mergeMs),
    lastStructureChangeS: Number(quietS.toFixed(1)),
    segmentsAfter: segments(),
    rounds: ROUNDS > 1 ? rounds : undefined,
    pagesByLevel: searchLevels(structure()).map((l) => l.pages),
    searchMedianUs: Math.round(times[100]! * 1000),
    loadavg: load.join(' → '),
  }),
);
look.close();
await store.close();
rmSync(dir, { recursive: true, force: true });
