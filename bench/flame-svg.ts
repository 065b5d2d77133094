/**
 * A flame graph, as an SVG picture, of V8 CPU profiles (`node --cpu-prof`): the samples of a time
 * window, stacks merged by function and file, each frame as wide as its share of the samples. Used
 * by bench/flame.ts for docs/benchmarks.md.
 *
 * Idle samples ("(idle)": the thread waiting in epoll) are left out, so the width is the thread's
 * CPU; "(program)" (V8 and Node's own C++ with no JS on the stack) and "(garbage collector)" stay.
 * Several profiles (one per thread) are drawn side by side under one root, each under a frame
 * naming its thread.
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
/** The fields of a .cpuprofile file this reads. */
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** One merged frame: its name, the µs of samples under it, its children by name. */
interface Frame {
  name: string;
  us: number;
  children: Map<string, Frame>;
}

const frame = (name: string): Frame => ({ name, us: 0, children: new Map() });

/** A short, stable name for a call frame: function, and file relative to dist/ or node_modules/. */
function nameOf(cf: CallFrame): string {
  const fn = cf.functionName || '(anonymous)';
  if (cf.url === '') return fn;
  const file = cf.url
    .replace(/^file:\/\/.*\/node_modules\//, '')
    .replace(/^file:\/\/.*\/dist\//, 'dist/')
    .replace(/^file:\/\//, '');
  return `${fn} ${file}:${cf.lineNumber + 1}`;
}

/**
 * Adds the samples of `profile` taken in [from, to] (µs of the monotonic clock the profile's
 * timestamps use, as process.hrtime) under `root`. Returns the µs added.
 */
export function addProfile(root: Frame, profile: CpuProfile, from: number, to: number): number {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  let added = 0;
  forSamples(profile, from, to, (leaf, us) => {
    const stack: string[] = [];
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const node = byId.get(id)!;
      if (node.callFrame.functionName !== '(root)') stack.push(nameOf(node.callFrame));
    }
    let f = root;
    f.us += us;
    for (let k = stack.length - 1; k >= 0; k--) {
      const name = stack[k]!;
      let child = f.children.get(name);
      if (child === undefined) {
        child = frame(name);
        f.children.set(name, child);
      }
      child.us += us;
      f = child;
    }
    added += us;
  });
  return added;
}

/**
 * Calls `fn` with each sample of `profile` taken in [from, to] (µs of the monotonic clock) but
 * idle ones, and its weight: the time to the next sample, as V8's own tools count it.
 */
function forSamples(
  profile: CpuProfile,
  from: number,
  to: number,
  fn: (leaf: ProfileNode, us: number) => void,
): void {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i] ?? 0;
    t += dt;
    if (t < from || t > to) continue;
    const leaf = byId.get(profile.samples[i]!)!;
    if (leaf.callFrame.functionName === '(idle)') continue;
    fn(leaf, profile.timeDeltas[i + 1] ?? dt);
  }
}

/**
 * The self time (µs) of each function, by name and file without its line, in the samples of
 * `profile` taken in [from, to] (as addProfile's), idle left out: for comparing two trees, whose
 * line numbers differ.
 */
export function selfTimes(profile: CpuProfile, from: number, to: number): Map<string, number> {
  const self = new Map<string, number>();
  forSamples(profile, from, to, (leaf, us) => {
    const name = nameOf(leaf.callFrame).replace(/:\d+$/, '');
    self.set(name, (self.get(name) ?? 0) + us);
  });
  return self;
}

export function newRoot(name: string): Frame {
  return frame(name);
}

const xml = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** Warm colours for plantstore's own code, blue for dependencies, grey for Node, red for native. */
function colour(name: string, depth: number): string {
  const shade = (depth * 37) % 40;
  if (name.includes(' dist/')) return `hsl(${30 + shade / 2}, 85%, ${62 + (shade % 12)}%)`;
  if (/ node:/.test(name)) return `hsl(210, 10%, ${70 + (shade % 15)}%)`;
  if (name.includes('.js:') || name.includes('.mjs:') || name.includes('.cjs:'))
    return `hsl(${200 + shade / 2}, 60%, ${68 + (shade % 12)}%)`;
  return `hsl(${355 + shade / 4}, 65%, ${66 + (shade % 12)}%)`;
}

const WIDTH = 1200;
const ROW = 16;
const CHAR = 6.6; // width of a character of the 11 px monospace font, about

/** The SVG of `root` (frames narrower than half a pixel are left out), with a title and a note. */
export function flameSvg(root: Frame, title: string, note: string): string {
  let depth = 0;
  const measure = (f: Frame, d: number) => {
    depth = Math.max(depth, d);
    for (const c of f.children.values()) if ((c.us / root.us) * WIDTH >= 0.5) measure(c, d + 1);
  };
  measure(root, 0);
  const top = 46;
  const height = top + (depth + 1) * ROW + 10;
  const rects: string[] = [];
  const draw = (f: Frame, x: number, d: number) => {
    const w = (f.us / root.us) * WIDTH;
    if (w < 0.5) return;
    const y = height - 10 - (d + 1) * ROW;
    const share = ((100 * f.us) / root.us).toFixed(1);
    const label = w > 4 * CHAR ? f.name.slice(0, Math.floor((w - 6) / CHAR)) : '';
    rects.push(
      `<g><title>${xml(f.name)} (${share} %)</title><rect x="${x.toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${ROW - 1}" fill="${colour(f.name, d)}" rx="2"/>` +
        (label ? `<text x="${(x + 3).toFixed(1)}" y="${y + 11}">${xml(label)}</text>` : '') +
        '</g>',
    );
    let cx = x;
    for (const c of [...f.children.values()].sort((a, b) => a.name.localeCompare(b.name))) {
      draw(c, cx, d + 1);
      cx += (c.us / root.us) * WIDTH;
    }
  };
  draw(root, 0, 0);
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="monospace" font-size="11">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="4" y="18" font-size="15" font-family="sans-serif">${xml(title)}</text>`,
    `<text x="4" y="36" font-size="11" font-family="sans-serif" fill="#444">${xml(note)}</text>`,
    ...rects,
    '</svg>',
    '',
  ].join('\n');
}

/** The `n` functions with the most self time under `root`, with their share of it. */
export function hottest(root: Frame, n: number): { name: string; share: number }[] {
  const self = new Map<string, number>();
  const walk = (f: Frame) => {
    let under = 0;
    for (const c of f.children.values()) {
      under += c.us;
      walk(c);
    }
    if (f !== root) self.set(f.name, (self.get(f.name) ?? 0) + f.us - under);
  };
  walk(root);
  return [...self]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, us]) => ({ name, share: us / root.us }));
}
