import cluster, { type Worker } from 'node:cluster';
import type { Config } from './config.js';
import { aggregateWorkerMetrics } from './http/metrics-cluster.js';
import { Runtime } from './runtime.js';
import { start } from './server.js';

const SHUTDOWN_GRACE_MS = 15_000;

function say(msg: string, extra: Record<string, unknown> = {}): void {
  try {
    process.stdout.write(
      `${JSON.stringify({ level: 30, time: Date.now(), pid: process.pid, msg, ...extra })}\n`,
    );
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
  let stopping = false;
  if (config.metrics) aggregateWorkerMetrics();
  const fork = (): Worker => cluster.fork();
  for (let i = 0; i < config.workers; i++) fork();
  say('primary started workers', { workers: config.workers });
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) {
        say('all workers stopped');
        process.exit(0);
      }
      return;
    }
    say('worker died; starting another', { worker: worker.process.pid, code, signal });
    setTimeout(fork, 500);
  });
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(1);
    stopping = true;
    say('stopping workers', { signal });
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill(signal);
    setTimeout(() => process.exit(1), SHUTDOWN_GRACE_MS).unref();
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
