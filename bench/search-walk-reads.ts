/**
 * How many plants a PostgreSQL search page reads, and in how many statements, on the layout of
 * `bench/size.ts` (10,000 users in a fixed shuffled order, each user's N / 10,000 plants one run of
 * ids going round its 4 gardens, the names of bench/plant-names.ts): an emulation in memory of
 * the walk (src/store/postgres/search.ts), with the service's own bookkeeping (walkArgs,
 * SearchWalk), beside the walk before it, which read each garden on its own up to its share of the
 * budget (50 plants a garden for 4) and went on, round by round, in the gardens whose known end lay
 * below the page's last match. No database: the counts follow from the layout alone, so they are
 * the same on any machine. Each caller's first page of 20 is checked against the matches the
 * layout holds.
 *
 *   npx tsx bench/search-walk-reads.ts [--size 10000000] [--terms "mon,mon del"] [--callers 100]
 */
import { parseArgs } from 'node:util';
import { SearchWalk, type WalkRow, walkArgs } from '../src/store/postgres/search.js';
import { makePlant, matches, prng } from './plant-names.js';

const { values: opt } = parseArgs({
  options: {
    size: { type: 'string', default: '10000000' },
    terms: { type: 'string', default: 'mon,mon del' },
    callers: { type: 'string', default: '100' },
  },
});
const USERS = 10_000;
const N = Number(opt.size);
const per = N / USERS;
const LIMIT = 20;

// The users' order and gardens, as bench/size.ts makes them.
const order = Array.from({ length: USERS }, (_, u) => u);
const shuffle = prng(57);
for (let k = order.length - 1; k > 0; k--) {
  const j = Math.floor(shuffle() * (k + 1));
  [order[k], order[j]] = [order[j]!, order[k]!];
}
const position = new Map(order.map((u, p) => [u, p]));
const gardensOf = (u: number) => [
  `h${u}`,
  `s${u}`,
  `s${(u + USERS - 1) % USERS}`,
  `s${(u + USERS - 2) % USERS}`,
];
interface Plant {
  id: number;
  garden: string;
  hit: boolean;
}
const plantsOf = (u: number, terms: string[]): Plant[] => {
  const rand = prng(1_000_003 + u);
  const g = gardensOf(u);
  const first = position.get(u)! * per + 1;
  return Array.from({ length: per }, (_, i) => ({
    id: first + i,
    garden: g[i % 4]!,
    hit: matches(makePlant(rand).name, terms),
  }));
};

interface Reads {
  plants: number;
  statements: number;
  planned: number;
}

/** The walk as the service runs it (without a tag): at most `budget` plants a statement, merged. */
function merged(all: Plant[], gardens: string[], terms: string[], r: Reads): number[] {
  const first = walkArgs({ gardens, terms, afterId: 0, limit: LIMIT, tag: null, withVersion: true })!;
  const walk = new SearchWalk(first);
  const inOrder = [...all].sort((a, b) => a.id - b.id);
  const run = (after: number): WalkRow[] => {
    r.statements++;
    // The gardens' ids merged and cut at the budget, then each garden's plants among them read
    // (every one of them: the budget's, or to the gardens' end); the answer is the first `limit`
    // rows of the matches and the marker at the budget's last plant.
    const rows: WalkRow[] = [];
    const read = inOrder.filter((q) => q.id > after).slice(0, first.budget);
    r.plants += read.length;
    for (const [k, p] of read.entries()) {
      const cut = k + 1 === first.budget;
      if (p.hit || cut) rows.push({ ...row(p), cut });
    }
    return rows.slice(0, LIMIT);
  };
  walk.take(run(0));
  let page = walk.page();
  for (let more = walk.next(); page === null && more !== null; more = walk.next()) {
    walk.take(run(more.afterId));
    page = walk.page();
  }
  if (page !== null) return page.map((p) => p.id);
  r.planned++;
  const rest = walk.rest();
  return [
    ...rest.page.map((p) => p.id),
    ...inOrder.filter((p) => p.hit && p.id > rest.from).map((p) => p.id),
  ];
}

/** The walk before: each garden on its own to its share of the budget, then rounds per garden. */
function perGarden(all: Plant[], gardens: string[], r: Reads): number[] {
  const budgetFor = (n: number) => Math.max(50, Math.ceil((10 * LIMIT) / n));
  const byGarden = new Map(
    gardens.map((g) => [g, all.filter((p) => p.garden === g).sort((a, b) => a.id - b.id)]),
  );
  const known = new Map(gardens.map((g) => [g, { end: 0, done: false }]));
  let found: number[] = [];
  const bound = () => Math.min(...[...known.values()].filter((k) => !k.done).map((k) => k.end));
  let walked = gardens;
  for (let round = 0; ; round++) {
    r.statements++;
    const budget = budgetFor(walked.length);
    const rows: (Plant & { cut: boolean })[] = [];
    for (const g of walked) {
      const read = byGarden
        .get(g)!
        .filter((p) => p.id > known.get(g)!.end)
        .slice(0, budget);
      r.plants += read.length;
      read.forEach((p, k) => {
        if (p.hit || k + 1 === budget) rows.push({ ...p, cut: k + 1 === budget });
      });
    }
    const answer = rows.sort((a, b) => a.id - b.id).slice(0, LIMIT);
    const cutAt = answer.length === LIMIT ? answer[answer.length - 1]!.id : null;
    for (const p of answer) if (p.hit) found.push(p.id);
    found = [...new Set(found)].sort((a, b) => a - b);
    for (const g of walked) {
      const k = known.get(g)!;
      const end = answer.find((p) => p.cut && p.garden === g)?.id ?? cutAt;
      if (end === null) k.done = true;
      else k.end = Math.max(k.end, end);
    }
    const b = bound();
    const sure = found.filter((id) => id <= b);
    if (sure.length >= LIMIT || b === Number.POSITIVE_INFINITY) return sure.slice(0, LIMIT);
    if (round >= 2 || found.length < LIMIT / 4) {
      r.planned++;
      return [...sure, ...all.filter((p) => p.hit && p.id > b).map((p) => p.id)].sort((x, y) => x - y);
    }
    const last = found.length >= LIMIT ? found[LIMIT - 1]! : null;
    walked = gardens.filter((g) => !known.get(g)!.done && (last === null || known.get(g)!.end < last));
  }
}

const row = (p: Plant) => ({ id: p.id, garden: p.garden, name: '', tag: null, version: 0, hit: p.hit });

for (const term of opt.terms!.split(',')) {
  const terms = term.trim().split(/\s+/);
  const now: Reads = { plants: 0, statements: 0, planned: 0 };
  const before: Reads = { plants: 0, statements: 0, planned: 0 };
  const pick = prng(99);
  const callers = Number(opt.callers);
  for (let c = 0; c < callers; c++) {
    const u = c === 0 ? 5000 : Math.floor(pick() * USERS);
    const gardens = gardensOf(u);
    const all = [u - 2, u - 1, u, u + 1, u + 2]
      .map((x) => (x + USERS) % USERS)
      .flatMap((x) => plantsOf(x, terms))
      .filter((p) => gardens.includes(p.garden));
    const want = all
      .filter((p) => p.hit)
      .map((p) => p.id)
      .sort((a, b) => a - b)
      .slice(0, LIMIT)
      .join();
    if (merged(all, gardens, terms, now).slice(0, LIMIT).join() !== want) throw new Error(`the walk: u${u}`);
    if (perGarden(all, gardens, before).slice(0, LIMIT).join() !== want)
      throw new Error(`the walk before: u${u}`);
  }
  const f = (r: Reads) =>
    `${(r.plants / callers).toFixed(1)} plants in ${(r.statements / callers).toFixed(2)} statements, planned ${(r.planned / callers).toFixed(2)}`;
  console.log(
    `${N.toLocaleString('en')} plants, "${term.trim()}", first pages of ${callers} callers in 4 gardens: the walk ${f(now)}; each garden on its own (before) ${f(before)}`,
  );
}
