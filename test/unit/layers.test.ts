// The house's rules of import (docs/architecture.md), read from the sources: the access policy
// imports nothing, the client nothing of the server but the two pure modules it shares, routes
// never the store, the store none of the services or HTTP, and no folder imports one that imports
// it back.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';

const src = resolve(import.meta.dirname, '../../src');

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : /\.tsx?$/.test(e.name) ? [join(dir, e.name)] : [],
  );
}

// Every relative import (static, dynamic, or a worker's URL) of every file under src/, as paths
// relative to src/ ('store/store.ts').
const IMPORT = /(?:from\s+|import\s*\(\s*|new URL\(\s*)'(\.{1,2}\/[^']+)'/g;
const imports = new Map<string, string[]>();
for (const file of files(src)) {
  const text = readFileSync(file, 'utf8');
  const found = [...text.matchAll(IMPORT)].map((m) =>
    relative(src, resolve(dirname(file), m[1]!)).replace(/\.js$/, '.ts'),
  );
  imports.set(relative(src, file), found);
}

// A file's room: its first folder under src/, or the file itself at the top.
const room = (path: string) => (path.includes('/') ? path.slice(0, path.indexOf('/')) : path);
const importsOf = (from: string) => [...imports].filter(([f]) => room(f) === from);

test('the sources were read', () => {
  assert.ok(imports.size > 100, `only ${imports.size} files`);
  assert.ok(importsOf('store').length > 20);
});

test('the access policy is pure: it imports nothing', () => {
  assert.deepEqual(imports.get('access/policy.ts'), []);
});

test('the client imports nothing of the server but the policy and the ETag format', () => {
  const allowed = new Set(['access/policy.ts', 'plants/etag.ts']);
  for (const [file, deps] of importsOf('client'))
    for (const dep of deps) assert.ok(room(dep) === 'client' || allowed.has(dep), `${file} imports ${dep}`);
});

test('routes speak HTTP: they import no store module but its domain types', () => {
  for (const [file, deps] of importsOf('routes'))
    for (const dep of deps) {
      if (room(dep) !== 'store') continue;
      const line = readFileSync(join(src, file), 'utf8')
        .split('\n')
        .find((l) => l.includes(`/${dep.replace(/\.ts$/, '.js')}'`));
      assert.match(line ?? '', /^import type /, `${file} imports ${dep} for more than its types`);
    }
});

test('the store imports no service, route, plugin or HTTP module', () => {
  const above = new Set(['plants', 'gardens', 'events', 'identity', 'http', 'routes', 'features', 'cli']);
  for (const [file, deps] of importsOf('store'))
    for (const dep of deps) assert.ok(!above.has(room(dep)), `${file} imports ${dep}`);
});

test('no two folders import each other, directly or around a circle', () => {
  const edges = new Map<string, Set<string>>();
  for (const [file, deps] of imports)
    for (const dep of deps) {
      const [a, b] = [room(file), room(dep)];
      if (a !== b) edges.set(a, (edges.get(a) ?? new Set()).add(b));
    }
  // Depth-first search for a back edge: a room reached again while it is still being walked.
  const state = new Map<string, 'walking' | 'done'>();
  const walk = (r: string, path: string[]): void => {
    state.set(r, 'walking');
    for (const next of edges.get(r) ?? []) {
      if (state.get(next) === 'walking') assert.fail(`circle: ${[...path, r, next].join(' → ')}`);
      if (!state.has(next)) walk(next, [...path, r]);
    }
    state.set(r, 'done');
  };
  for (const r of edges.keys()) if (!state.has(r)) walk(r, []);
});
