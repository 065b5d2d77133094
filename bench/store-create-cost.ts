/**
 * What one create costs the SQLite store itself, without HTTP: 40,000 creates, 20 in flight, on a
 * fresh file (durability full, the writer thread), as creates/s and the process's CPU µs per create
 * (the writer thread included). Run it against two checkouts to see what a change to the write path
 * costs, e.g. the search index (docs/search.md):
 *
 *   git worktree add /tmp/before <commit> && ln -s "$PWD/node_modules" /tmp/before/node_modules
 *   npx tsx bench/store-create-cost.ts /tmp/before && npx tsx bench/store-create-cost.ts .
 *
 * The machine is small and shared: run each side more than once, alternating.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(process.argv[2] ?? '.');
const N = Number(process.argv[3] ?? 40_000);
const { SqliteStore } = await import(join(root, 'src/store/sqlite/store.ts'));
const dir = mkdtempSync(join(tmpdir(), 'plantstore-create-cost-'));
const store = new SqliteStore({ path: join(dir, 'plants.db'), durability: 'full' });
await store.migrate();
const garden = (await store.homeGarden('u', { id: 'gdn_create_cost', name: 'Home', at: new Date() })).id;
const WORDS = ['Monstera', 'deliciosa', 'Ficus', 'Café', 'rose', 'fern', 'aloe', 'pilea'];
let next = 0;
async function creator() {
  while (next < N) {
    const k = next++;
    const name = `${WORDS[k % 8]} ${WORDS[(k * 7) % 8]} ${k}`;
    await store.createPlant({ id: null, owner: 'u', garden, name, tag: null }, undefined, { at: new Date() });
  }
}
const cpu = process.cpuUsage();
const start = performance.now();
await Promise.all(Array.from({ length: 20 }, creator));
const seconds = (performance.now() - start) / 1000;
const used = process.cpuUsage(cpu);
console.log(
  JSON.stringify({
    root,
    creates: N,
    perSecond: Math.round(N / seconds),
    cpuMicrosPerCreate: Number(((used.user + used.system) / N).toFixed(1)),
  }),
);
await store.close();
rmSync(dir, { recursive: true, force: true });
