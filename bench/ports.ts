import { createServer } from 'node:net';

/** A TCP port free on 127.0.0.1 right now, for a server the benchmark starts. */
export const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });

/** Resolves once GET `url``path` answers 2xx; throws after 30 s. */
export async function waitReady(url: string, path: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${url}${path}`)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${url} did not become ready`);
}

/** `serve` flags every benchmarked plantstore gets: quiet logs, no rate limits in the way. */
export const BENCH_SERVE_FLAGS = ['--log-level', 'warn', '--rate-limit', '0', '--auth-failure-limit', '0'];
