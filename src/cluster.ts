import cluster, { type Worker } from 'node:cluster';
import type { Config } from './config.js';
import { effectiveConfig } from './config-log.js';
import { aggregateWorkerMetrics } from './http/metrics-cluster.js';
import { Runtime } from './runtime.js';
import { start } from './server.js';
import { VERSION } from './version.js';

// Each worker exits by 9.5 s after the signal (server.ts); the primary a little after, still
// within the 10 s of contract 14.2.
const SHUTDOWN_GRACE_MS = 9_800;

function say(msg: string, extra: Record<string, unknown> = {}, level = 30): void {
  try {
    process.stdout.write(`${JSON.stringify({ level, time: Date.now(), pid: process.pid, msg, ...extra })}\n`);
  } catch {}
}

/**
 * `serve --workers N`: N processes share one port through node:cluster. The primary migrates
 * once, forks the workers, replaces one that dies, and on SIGTERM/SIGINT passes the signal on
 * and exits when every worker has finished its in-flight requests.
 */
export async function serveAll(config: Config): Promise<void> {
  if (config.workers <= 1 || cluster.isWorker) {
    await start(config);
    return;
  }
  await (await Runtime.open(config, 'command')).close();
  say('effective configuration', { version: VERSION, config: effectiveConfig(config) });
  let stopping = false;
  // Whether a worker stopped with anything but 0: then the primary does too.
  let failed = false;
  if (config.metrics) aggregateWorkerMetrics();
  const fork = (): Worker => cluster.fork();
  for (let i = 0; i < config.workers; i++) fork();
  say('primary started workers', { workers: config.workers });
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) {
      if (code !== 0) failed = true;
      if (Object.keys(cluster.workers ?? {}).length === 0) {
        say('all workers stopped');
        process.exit(failed ? 1 : 0);
      }
      return;
    }
    say('worker died; starting another', { worker: worker.process.pid, code, signal });
    setTimeout(fork, 500);
  });
  // Each worker drains and closes on the signal by itself (server.ts); the primary waits for them.
  const stop = (signal: NodeJS.Signals, code: 0 | 1 = 0) => {
    if (stopping) process.exit(1);
    stopping = true;
    if (code !== 0) failed = true;
    say('stopping workers', { signal });
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill(signal);
    setTimeout(() => process.exit(1), SHUTDOWN_GRACE_MS).unref();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  const crashed = (what: string) => (err: unknown) => {
    const e =
      err instanceof Error
        ? { type: err.name, message: err.message, stack: err.stack }
        : { value: String(err) };
    say(`${what} in the primary: stopping the workers`, { err: e }, 60);
    stop('SIGTERM', 1);
  };
  process.on('uncaughtException', crashed('uncaught exception'));
  process.on('unhandledRejection', crashed('unhandled rejection'));
}
