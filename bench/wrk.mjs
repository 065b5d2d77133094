#!/usr/bin/env node
// One load-generator run with wrk (Debian's package), the same interface as bench/load.mjs:
//   node bench/wrk.mjs '<json spec>'  → prints one JSON result line.
// spec: { urls, connections, duration?, amount?, method, path, body?, token?, ifMatch?, idsFile?, eachOnce?, idsOut?,
//         rotation? ("all": cycle through every id, not the first 256), start? (offset into the ids) }
// One wrk process (one thread) per URL, the connections and a fixed amount's ids split between
// them; wrk measures latency in C with microsecond resolution, so the figures are the server's
// rather than the load generator's own queueing (see docs/benchmarks.md).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { combine } from './combine.mjs';

const spec = JSON.parse(process.argv[2]);
const script = join(dirname(fileURLToPath(import.meta.url)), 'wrk.lua');
const ids = spec.idsFile ? JSON.parse(readFileSync(spec.idsFile, 'utf8')) : null;
const tmp = mkdtempSync(join(tmpdir(), 'plantstore-wrk-'));

// A fixed amount (each id once) is split exactly between the URLs; reads share the rotation.
const n = spec.urls.length;
const share = (i) => (spec.eachOnce ? ids.filter((_, k) => k % n === i) : ids);
const per = Math.max(1, Math.floor(spec.connections / n));

function run(url, i) {
  const mine = ids ? share(i) : null;
  if (mine && mine.length === 0) return Promise.resolve(null);
  const env = {
    ...process.env,
    WRK_METHOD: spec.method,
    WRK_PATH: spec.path,
    WRK_BODY: spec.body ? JSON.stringify(spec.body) : '',
    WRK_TOKEN: spec.token ?? '',
    WRK_IF_MATCH: spec.ifMatch ?? '',
    WRK_EACH_ONCE: spec.eachOnce ? '1' : '0',
    WRK_RECORD: spec.idsOut ? '1' : '0',
    WRK_ROTATION: String(spec.rotation ?? 256),
    WRK_START: String(spec.start ?? 0),
  };
  if (mine) {
    env.WRK_IDS = join(tmp, `ids-${i}.txt`);
    writeFileSync(env.WRK_IDS, `${mine.join('\n')}\n`);
  }
  const connections = mine && spec.eachOnce ? Math.min(per, mine.length) : per;
  // A fixed amount ends itself after its last answer; the duration is only a bound.
  // wrk takes whole seconds.
  const duration = spec.eachOnce ? 600 : Math.max(1, Math.round(spec.duration ?? 5));
  const args = ['-t1', `-c${connections}`, `-d${duration}s`, '--timeout', '30s', '-s', script, url];
  return new Promise((resolve, reject) => {
    const child = spawn('wrk', args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    // wrk's main thread sleeps for the whole duration whatever its threads do: SIGINT ends the
    // sleep (wrk's own handler), and wrk then reports as usual.
    child.stderr.on('data', (d) => {
      const text = String(d);
      if (text.includes('WRK_DONE')) child.kill('SIGINT');
      process.stderr.write(text.replace(/WRK_DONE\n/g, ''));
    });
    child.on('error', reject);
    child.on('close', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('RESULT '));
      if (code !== 0 || !line) reject(new Error(`wrk exited with ${code}: ${out}`));
      else resolve(JSON.parse(line.slice(7)));
    });
  });
}

try {
  const results = (await Promise.all(spec.urls.map(run))).filter((r) => r !== null);
  const ms = (us) => Math.round(us / 10) / 100;
  const out = combine(
    results.map((r) => ({
      requests: r.requests,
      seconds: r.duration_us / 1e6,
      p50: ms(r.p50_us),
      p99: ms(r.p99_us),
      non2xx: r.non2xx,
      errors: r.errors,
    })),
  );
  if (spec.idsOut) writeFileSync(spec.idsOut, JSON.stringify(results.flatMap((r) => r.created)));
  process.stdout.write(`${JSON.stringify(out)}\n`);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
