// Preload for a served process (NODE_OPTIONS="--require ./bench/rss-probe.cjs" RSS_PROBE=PREFIX):
// at each new maximum of RSS, PREFIX.PID gets process.memoryUsage(), the V8 spaces and
// /proc/self/smaps_rollup (MB), PREFIX.PID.smaps a copy of /proc/self/smaps; each worker thread
// writes its own isolate's largest heap to PREFIX.PID.wTHREADID. docs/benchmarks.md, "Memory".
const { isMainThread } = require('node:worker_threads');
if (isMainThread && process.env.RSS_PROBE && process.argv.includes('serve')) {
  const fs = require('node:fs');
  const v8 = require('node:v8');
  const out = `${process.env.RSS_PROBE}.${process.pid}`;
  let best = 0;
  const mb = (x) => Math.round(x / 1048576);
  const t = setInterval(() => {
    const m = process.memoryUsage();
    if (m.rss <= best) return;
    best = m.rss;
    const spaces = Object.fromEntries(
      v8.getHeapSpaceStatistics().map((s) => [s.space_name.replace('_space', ''), mb(s.space_size)]),
    );
    const roll = {};
    try {
      for (const l of fs.readFileSync('/proc/self/smaps_rollup', 'utf8').split('\n')) {
        const k = l.match(/^(Rss|Anonymous|Pss_File|Pss_Anon):\s+(\d+)/);
        if (k) roll[k[1]] = Math.round(k[2] / 1024);
      }
    } catch {}
    fs.writeFileSync(
      out,
      JSON.stringify({
        t: Math.round(process.uptime()),
        rss: mb(m.rss),
        heapTotal: mb(m.heapTotal),
        heapUsed: mb(m.heapUsed),
        external: mb(m.external),
        arrayBuffers: mb(m.arrayBuffers),
        spaces,
        roll,
      }) + '\n',
    );
    try {
      fs.writeFileSync(out + '.smaps', fs.readFileSync('/proc/self/smaps', 'utf8'));
    } catch {}
  }, 100);
  t.unref();
}
if (!isMainThread && process.env.RSS_PROBE) {
  const fs = require('node:fs');
  const v8 = require('node:v8');
  const { threadId } = require('node:worker_threads');
  const out = `${process.env.RSS_PROBE}.${process.pid}.w${threadId}`;
  let best = 0;
  const mb = (x) => Math.round(x / 1048576);
  const t = setInterval(() => {
    const h = v8.getHeapStatistics();
    if (h.total_heap_size <= best) return;
    best = h.total_heap_size;
    const spaces = Object.fromEntries(
      v8.getHeapSpaceStatistics().map((s) => [s.space_name.replace('_space', ''), mb(s.space_size)]),
    );
    fs.writeFileSync(
      out,
      JSON.stringify({
        file: process.argv[1],
        total: mb(h.total_heap_size),
        used: mb(h.used_heap_size),
        malloced: mb(h.malloced_memory),
        peakMalloced: mb(h.peak_malloced_memory),
        spaces,
      }) + '\n',
    );
  }, 100);
  t.unref();
}
