/**
 * What one create costs the SQLite store itself, without HTTP: 40,000 creates, 20 in flight, on a
 * fresh file (durability full, the writer thread), as creates/s and the process's CPU µs per create
 * (the writer thread included); then a change and a delete of each plant, the same way. Each
 * event is given who caused it (an actor and a request id, as a request gives them: contract 13.1;
 * a tree before that ignores them), and each delete puts the plant in the trash as the service
 * does with the trash on, its default (contract 13.2; a tree before the trash ignores it). Run it against two checkouts to see what a change to the write
 * path costs, e.g. the search index (docs/search.md):
 *
 *   git worktree add /tmp/before <commit> && ln -s "$PWD/node_modules" /tmp/before/node_modules
 *   npx tsx bench/store-create-cost.ts /tmp/before && npx tsx bench/store-create-cost.ts .
 *
 * NO_TRASH=1 deletes for good instead (what the trash row itself costs a delete).
 * SEARCH_MERGE=automerge leaves the search index's merges to FTS5's automerge, inside the commits
 * (search-merge.ts), to weigh the writer's paced merge steps against it.
 * The machine is small and shared: run each side more than once, alternating.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(process.argv[2] ?? '.');
const N = Number(process.argv[3] ?? 40_000);
const { SqliteStore } = await import(join(root, 'src/store/sqlite/store.ts'));
const dir = mkdtempSync(join(tmpdir(), 'plantstore-create-cost-'));
// SEARCH_MERGE=automerge: FTS5's automerge in the commits instead of the writer's paced merge steps.
const searchMerge = process.env.SEARCH_MERGE === 'automerge' ? 'automerge' : 'paced';
const store = new SqliteStore({ path: join(dir, 'plants.db'), durability: 'full', searchMerge });
await store.migrate();
const garden = (await store.homeGarden('u', { id: 'gdn_create_cost', name: 'Home', at: new Date() })).id;
const WORDS = ['Monstera', 'deliciosa', 'Ficus', 'Café', 'rose', 'fern', 'aloe', 'pilea'];
const event = () => ({ at: new Date(), actor: 'u', requestId: randomUUID() });
const ids: number[] = [];

// Runs `op` for k = 0 … N-1, 20 at a time; answers ops/s and CPU µs per op.
async function phase(op: (k: number) => Promise<void>) {
  let next = 0;
  const worker = async () => {
    while (next < N) await op(next++);
  };
  const cpu = process.cpuUsage();
  const start = performance.now();
  await Promise.all(Array.from({ length: 20 }, worker));
  const seconds = (performance.now() - start) / 1000;
  const used = process.cpuUsage(cpu);
  return {
    perSecond: Math.round(N / seconds),
    cpuMicros: Number(((used.user + used.system) / N).toFixed(1)),
  };
}

const create = await phase(async (k) => {
  const name = `${WORDS[k % 8]} ${WORDS[(k * 7) % 8]} ${k}`;
  const r = await store.createPlant({ id: null, owner: 'u', garden, name, tag: null }, undefined, event());
  ids[k] = r.ok.id;
});
const change = await phase(async (k) => {
  await store.updatePlant(ids[k], 'u', { name: `Changed ${k}` }, null, undefined, event());
});
const remove = await phase(async (k) => {
  const e = event();
  const trashing = { deletedAt: e.at, deletedBy: 'u', purgeAt: new Date(e.at.getTime() + 30 * 86_400_000) };
  await store.deletePlant(ids[k], 'u', e, null, process.env.NO_TRASH ? null : trashing);
});
console.log(
  JSON.stringify({
    root,
    creates: N,
    perSecond: create.perSecond,
    cpuMicrosPerCreate: create.cpuMicros,
    cpuMicrosPerChange: change.cpuMicros,
    cpuMicrosPerDelete: remove.cpuMicros,
  }),
);
await store.close();
rmSync(dir, { recursive: true, force: true });
