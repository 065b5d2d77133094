// The one result line of a load-generator run (bench/load.mjs, bench/wrk.mjs) from its runs
// against each URL, each given as { requests, seconds, p50, p99, non2xx, errors } (ms for latency).
export function combine(runs) {
  const total = runs.reduce((n, r) => n + r.requests, 0);
  return {
    rps: total / Math.max(...runs.map((r) => r.seconds)),
    // With several targets, the worst target's percentiles.
    p50: Math.max(...runs.map((r) => r.p50)),
    p99: Math.max(...runs.map((r) => r.p99)),
    total,
    non2xx: runs.reduce((n, r) => n + r.non2xx, 0),
    errors: runs.reduce((n, r) => n + r.errors, 0),
  };
}
