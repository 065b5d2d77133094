/**
 * better-sqlite3 (Node-API addon, what the store uses) vs Node's built-in node:sqlite (DatabaseSync)
 * on plantstore's hot statements: issue "Runs on Node 24". better-sqlite3 12.x is not measured: it
 * aborts on Node 24, which is why we moved to 13.x.
 *
 *   Node 24:    npx tsx bench/sqlite-bindings.ts
 *   Node 22.14: .tmp/node-22.14.0/bin/node --import tsx bench/sqlite-bindings.ts
 *               (node:sqlite needs no flag from 22.13 on, but 22.x prints an ExperimentalWarning;
 *               22.5-22.12 need --experimental-sqlite)
 *
 * The machine is small and shared, so absolute numbers are noisy: bindings run in alternating order
 * in each round, each case reports the median of ROUNDS, and the column to read is the ratio
 * between the two bindings measured in the same run. BENCH_SECONDS (env) sets the time per measurement.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';

const ROWS = 100_000;
const OWNERS = 20;
const ROUNDS = 3;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 1);
const PREPARES = 100_000;

// Catch the ExperimentalWarning node:sqlite may emit, to report it (it is emitted on first load,
// hence the dynamic import below, after the listener exists).
const warnings: string[] = [];
process.on('warning', (w) => warnings.push(`${w.name}: ${w.message}`));

type Param = string | number | null;
/** The part of a statement both bindings share, structurally. */
interface Stmt {
  get(...p: Param[]): unknown;
  all(...p: Param[]): unknown[];
  run(...p: Param[]): unknown;
}
interface Conn {
  exec(sql: string): void;
  prepare(sql: string): Stmt;
  /** The same statement returning rows as arrays (the store's `.raw()`), if the binding can. */
  arrays(sql: string): Stmt | undefined;
  close(): void;
}
interface Binding {
  name: string;
  open(file: string): Conn;
}

const bindings: Binding[] = [
  {
    name: `better-sqlite3 ${createRequire(import.meta.url)('better-sqlite3/package.json').version}`,
    open(file) {
      const db = new Database(file);
      return {
        exec: (sql) => void db.exec(sql),
        prepare: (sql) => db.prepare<Param[]>(sql),
        arrays: (sql) => db.prepare<Param[]>(sql).raw(true),
        close: () => db.close(),
      };
    },
  },
];
try {
  const { DatabaseSync } = await import('node:sqlite');
  bindings.push({
    name: 'node:sqlite',
    open(file) {
      const db = new DatabaseSync(file);
      return {
        exec: (sql) => db.exec(sql),
        prepare: (sql) => db.prepare(sql),
        // setReturnArrays arrived in Node 24 (and 22.16); absent on 22.14.
        arrays: (sql) => {
          const s = db.prepare(sql);
          if (typeof s.setReturnArrays !== 'function') return undefined;
          s.setReturnArrays(true);
          return s;
        },
        close: () => db.close(),
      };
    },
  });
} catch (err) {
  console.log(`node:sqlite unavailable on ${process.version}: ${(err as Error).message}`);
}
await new Promise((r) => setImmediate(r)); // let a pending 'warning' event fire

// The store's schema and pragmas (src/store/sqlite), seeded identically in one file per binding.
const dir = mkdtempSync(join(tmpdir(), 'plantstore-sqlite-bench-'));
const conns = bindings.map((b, i) => {
  const c = b.open(join(dir, `db${i}.sqlite`));
  c.exec(`PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000;
    CREATE TABLE plants (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL, tag TEXT);
    CREATE INDEX plants_owner_id ON plants (owner, id);`);
  const ins = c.prepare('INSERT INTO plants (id, owner, name, tag) VALUES (?, ?, ?, ?)');
  c.exec('BEGIN');
  for (let id = 1; id <= ROWS; id++) ins.run(id, `u${id % OWNERS}`, `plant ${id}`, id % 3 ? null : 'green');
  c.exec('COMMIT');
  return c;
});
const sqliteVersions = conns.map((c) => (c.prepare('SELECT sqlite_version() AS v').get() as { v: string }).v);

// A case returns a function doing `n` operations starting at operation number `i`; sequences are
// deterministic strides so both bindings touch the same rows.
type Case = (c: Conn) => ((i: number, n: number) => void) | undefined;
const GET = 'SELECT id, owner, name, tag FROM plants WHERE id = ?';
const PAGE = 'SELECT id, owner, name, tag FROM plants WHERE owner = ? AND id > ? ORDER BY id LIMIT 100';
const point = (s: Stmt | undefined) =>
  s &&
  ((i: number, n: number) => {
    for (let k = i; k < i + n; k++) s.get(((k * 7919) % ROWS) + 1);
  });
const page = (s: Stmt | undefined) =>
  s &&
  ((i: number, n: number) => {
    for (let k = i; k < i + n; k++) s.all(`u${k % OWNERS}`, (k * 7919) % (ROWS - 3000));
  });
// Batches of 50 rows per BEGIN IMMEDIATE / COMMIT, like the store's write batching; one op = one commit.
const inserts =
  (sync: 'FULL' | 'NORMAL'): Case =>
  (c) => {
    const begin = c.prepare('BEGIN IMMEDIATE');
    const commit = c.prepare('COMMIT');
    const ins = c.prepare('INSERT INTO plants (owner, name, tag) VALUES (?, ?, ?)');
    return (i, n) => {
      c.exec(`PRAGMA synchronous = ${sync}`);
      for (let k = i; k < i + n; k++) {
        begin.run();
        for (let r = 0; r < 50; r++) ins.run(`u${r % OWNERS}`, `new ${k}.${r}`, null);
        commit.run();
      }
    };
  };
const cases: [string, Case][] = [
  ['point read by id (.get, objects)', (c) => point(c.prepare(GET))],
  ['point read by id (.get, arrays)', (c) => point(c.arrays(GET))],
  ['page of 100 by owner (.all, objects)', (c) => page(c.prepare(PAGE))],
  ['page of 100 by owner (.all, arrays)', (c) => page(c.arrays(PAGE))],
  ['insert 50 rows/tx, synchronous=FULL (commits)', inserts('FULL')],
  ['insert 50 rows/tx, synchronous=NORMAL (commits)', inserts('NORMAL')],
  [
    // Statements are not finalized explicitly by either binding: they are freed when GC'd.
    `prepare a statement (${PREPARES / 1000}k per round, GC frees)`,
    (c) => (_i, n) => {
      for (let k = 0; k < n; k++) c.prepare(PAGE);
    },
  ],
];

/** ops/s: runs chunks until SECONDS elapse (or exactly `fixed` ops), timed with hrtime. */
function measure(fn: (i: number, n: number) => void, fixed?: number): number {
  const chunk = fixed ?? 50;
  fn(0, Math.min(chunk, 200)); // warm-up: JIT, page cache, statement cache
  let ops = 0;
  const start = process.hrtime.bigint();
  const end = start + BigInt(Math.round(SECONDS * 1e9));
  let now = start;
  do {
    fn(ops, chunk);
    ops += chunk;
    now = process.hrtime.bigint();
  } while (fixed === undefined && now < end);
  return ops / (Number(now - start) / 1e9);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const fmt = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : 'n/a');

const results = cases.map(() => bindings.map(() => [] as number[]));
for (let round = 0; round < ROUNDS; round++) {
  // Alternate which binding goes first, so drift on the machine does not favour one of them.
  const order = bindings.map((_, b) => b);
  if (round % 2) order.reverse();
  cases.forEach(([, make], ci) => {
    for (const b of order) {
      const conn = conns[b]!;
      const fn = make(conn);
      if (!fn) continue;
      const isPrepare = ci === cases.length - 1;
      results[ci]![b]!.push(measure(fn, isPrepare ? PREPARES : undefined));
      if (isPrepare) globalThis.gc?.();
    }
  });
}

console.log(
  `\nNode ${process.version}, ${process.platform}-${process.arch}; ${bindings
    .map((b, i) => `${b.name} (SQLite ${sqliteVersions[i]})`)
    .join(', ')}; ${ROWS.toLocaleString('en-US')} rows, WAL, ${ROUNDS} rounds × ${SECONDS}s, median ops/s\n`,
);
const names = bindings.map((b) => b.name);
const ratio = names.length > 1 ? ['node:sqlite / better-sqlite3'] : [];
console.log(`| case | ${[...names, ...ratio].join(' | ')} |`);
console.log(`|---|${[...names, ...ratio].map(() => '---:').join('|')}|`);
cases.forEach(([label], ci) => {
  const med = results[ci]!.map(median);
  const r = med.length > 1 ? [`${((med[1] ?? Number.NaN) / (med[0] ?? Number.NaN)).toFixed(2)}×`] : [];
  console.log(`| ${label} | ${[...med.map(fmt), ...r].join(' | ').replace('NaN×', 'n/a')} |`);
});
console.log(
  warnings.length ? `\nWarnings: ${[...new Set(warnings)].join('; ')}` : '\nWarnings: none emitted',
);

for (const c of conns) c.close();
rmSync(dir, { recursive: true, force: true });
