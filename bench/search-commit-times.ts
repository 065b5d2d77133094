/**
 * How long SQLite commits take when FTS5 merges the search index inside them: a `plant_search`
 * table as the store makes it (search.ts) filled with 100,000 plants' words and merged into one
 * segment, then 20,000 commits of 2 plants each, each commit timed; the p50, p99, the longest and
 * how many took over 10 and 30 ms. Given a number, FTS5's `automerge` is set to it first (default
 * 4; 0 turns automatic merges off until a level holds `crisismerge` segments). With --merge-each N
 * every commit also runs the store's merge step (search-merge.ts, MERGE_STEP_SQL) with N pages,
 * FTS5's `usermerge` set to --usermerge first (default 2, the store's own).
 *
 *   taskset -c 0 npx tsx bench/search-commit-times.ts [AUTOMERGE] [--merge-each N] [--usermerge U] [--dir /dev/shm]
 *
 * The file is made under --dir (default /dev/shm, so that no fsync is timed) and removed after.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { indexedWords } from '../src/search-text.js';
import { SEARCH_TABLE } from '../src/store/sqlite/search.js';
import { MERGE_STEP_SQL } from '../src/store/sqlite/search-merge.js';
import { makePlant, prng } from './plant-names.js';

const { values: opt, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    dir: { type: 'string', default: '/dev/shm' },
    // Each commit also runs FTS5's 'merge' with this many pages (0: none), usermerge set first.
    'merge-each': { type: 'string', default: '0' },
    usermerge: { type: 'string', default: '2' },
  },
});
const automerge = positionals[0] === undefined ? undefined : Number(positionals[0]);
if (automerge !== undefined && !Number.isInteger(automerge)) throw new Error('AUTOMERGE: a whole number');
const path = join(opt.dir!, `plantstore-commit-times-${process.pid}.db`);
const db = new Database(path);
try {
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(SEARCH_TABLE);
  // FTS5 takes a setting's value only as an integer literal (a bound JS number is a REAL).
  if (automerge !== undefined)
    db.exec(`INSERT INTO plant_search (plant_search, rank) VALUES ('automerge', ${automerge})`);
  const insert = db.prepare('INSERT INTO plant_search (rowid, garden, words) VALUES (?, ?, ?)');
  const rand = prng(7);
  let id = 0;
  const add = () => {
    id++;
    insert.run(id, `g${id % 200}`, indexedWords(makePlant(rand).name));
  };
  db.transaction(() => {
    for (let i = 0; i < 100_000; i++) add();
  })();
  db.exec("INSERT INTO plant_search (plant_search) VALUES ('optimize')");
  const mergeEach = Number(opt['merge-each']);
  const merge = mergeEach > 0 ? db.prepare<[number]>(MERGE_STEP_SQL) : null;
  if (merge)
    db.exec(`INSERT INTO plant_search (plant_search, rank) VALUES ('usermerge', ${Number(opt.usermerge)})`);
  const commit = db.transaction(() => {
    add();
    add();
    merge?.run(mergeEach);
  });
  const t0 = performance.now();
  const times: number[] = [];
  for (let c = 0; c < 20_000; c++) {
    const t = performance.now();
    commit();
    times.push(performance.now() - t);
  }
  const total = performance.now() - t0;
  const sorted = [...times].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
  const longest = times
    .map((ms, i) => [ms, i] as const)
    .sort((a, b) => b[0] - a[0])
    .slice(0, 5)
    .map(([ms, i]) => `#${i} ${ms.toFixed(1)} ms`);
  console.log(
    `automerge ${automerge ?? '4 (default)'}${mergeEach > 0 ? `, merge ${mergeEach} a commit, usermerge ${opt.usermerge}` : ''}: 20,000 commits of 2 plants on 100,000 in ${total.toFixed(0)} ms: p50 ${at(50).toFixed(3)} ms, p99 ${at(99).toFixed(3)} ms, longest ${sorted[sorted.length - 1]!.toFixed(1)} ms; over 10 ms ${times.filter((x) => x > 10).length}, over 30 ms ${times.filter((x) => x > 30).length}; the longest: ${longest.join(', ')}`,
  );
} finally {
  db.close();
  for (const f of [path, `${path}-wal`, `${path}-shm`]) rmSync(f, { force: true });
}
