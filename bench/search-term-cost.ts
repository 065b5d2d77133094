/**
 * What a search term longer than SQLite's prefix indexes costs the store itself, without HTTP, when
 * many plants share its first letters but few or none match it (docs/search.md): 50,000 plants named
 * "filler N" and two "fillerz …", then `q=fillerz` (and `fillerzq`, `filler`); and a term many
 * words begin with: 50,000 more named "alpha{N % 64} beta{N % 65}", then `alph` (64 words) and
 * `beta` (65); and 65 named "fillerzw{N}", after all the rest, then `fillerzw` (65 words, their rows
 * far from the first "fil…"). All in one garden, read through store.listPlants, a page of 20; the median ms of
 * 30 reads each. Run it against two checkouts to compare:
 *
 *   mkdir /tmp/before && git archive <commit> | tar -x -C /tmp/before && ln -s "$PWD/node_modules" /tmp/before/node_modules
 *   npx tsx bench/search-term-cost.ts /tmp/before && npx tsx bench/search-term-cost.ts .
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(process.argv[2] ?? '.');
const N = Number(process.argv[3] ?? 50_000);
const { SqliteStore } = await import(join(root, 'src/store/sqlite/store.ts'));
const dir = mkdtempSync(join(tmpdir(), 'plantstore-term-cost-'));
const store = new SqliteStore({ path: join(dir, 'plants.db'), durability: 'normal', searchMergeQuietMs: 50 });
await store.migrate();
const garden = (await store.homeGarden('u', { id: 'gdn_term_cost', name: 'Home', at: new Date() })).id;
const plant = (name: string) => ({ id: null, owner: 'u', garden, admin: true, name, tag: null });
for (let k = 0; k < N; k += 1000)
  await store.createPlants(Array.from({ length: Math.min(1000, N - k) }, (_, i) => plant(`filler ${k + i}`)));
await store.createPlants([plant('Fillerz one'), plant('fillerz two')]);
for (let k = 0; k < N; k += 1000)
  await store.createPlants(
    Array.from({ length: Math.min(1000, N - k) }, (_, i) =>
      plant(`alpha${(k + i) % 64} beta${(k + i) % 65}`),
    ),
  );
await store.createPlants(Array.from({ length: 65 }, (_, i) => plant(`fillerzw${i}`)));
// Let the search index merge into one segment (docs/search.md), as on a store at rest.
await new Promise((r) => setTimeout(r, 3000));
const result: Record<string, unknown> = { root, plants: 2 * N + 67 };
for (const term of ['fillerz', 'fillerzq', 'filler', 'alph', 'beta', 'fillerzw']) {
  const times: number[] = [];
  let found = 0;
  for (let i = 0; i < 30; i++) {
    const start = performance.now();
    const page = await store.listPlants({
      gardens: [garden],
      tag: null,
      afterId: 0,
      limit: 20,
      terms: [term],
    });
    times.push(performance.now() - start);
    found = page.length;
  }
  times.sort((a, b) => a - b);
  result[term] = { found, medianMs: Number(times[15]!.toFixed(3)) };
}
console.log(JSON.stringify(result));
await store.close();
rmSync(dir, { recursive: true, force: true });
