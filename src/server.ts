import cluster from 'node:cluster';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import type { Config } from './config.js';
import { effectiveConfig } from './config-log.js';
import { VERSION } from './version.js';

// Contract 14.2: exit within 10 s of SIGTERM. The requests in flight get 8 s to finish; closing the
// store and the connections follows; at 9.5 s the process exits whatever is left (code 1).
const DRAIN_MS = 8_000;
const SHUTDOWN_GRACE_MS = 9_500;

/**
 * Builds the app, listens, and stops gracefully on SIGINT/SIGTERM: it drains (http/drain.ts:
 * /readyz and every new request 503 with Retry-After, the requests in flight finish, the live
 * streams end), then closes (stops listening, closes the store) and exits 0. An uncaught exception
 * or unhandled rejection is logged as JSON and stops it the same way, exiting 1. A second signal,
 * or the grace period running out, exits at once.
 */
export async function start(config: Config): Promise<FastifyInstance> {
  const app = await buildApp(config);
  // Once per start: with --workers the primary logs it (cluster.ts), not each worker.
  if (!cluster.isWorker)
    app.log.info({ version: VERSION, config: effectiveConfig(config) }, 'effective configuration');
  let closing = false;
  // Logging may fail (stdout gone with its reader); shutting down must not depend on it.
  const log = (level: 'info' | 'warn' | 'error' | 'fatal', obj: object, msg: string) => {
    try {
      app.log[level](obj, msg);
    } catch {}
  };
  const shutdown = (reason: string, code: 0 | 1) => {
    if (closing) {
      log('warn', { reason }, 'told again to stop: exiting now');
      process.exit(1);
    }
    closing = true;
    setTimeout(() => {
      log('error', {}, 'shutdown took too long: exiting');
      process.exit(1);
    }, SHUTDOWN_GRACE_MS).unref();
    log('info', { reason }, 'shutting down: new requests answer 503; finishing the requests in flight');
    let waited: NodeJS.Timeout | undefined;
    const drained = Promise.race([
      app.drain.start(),
      new Promise<void>((resolve) => {
        waited = setTimeout(() => {
          log('warn', {}, `requests still in flight after ${DRAIN_MS} ms: closing anyway`);
          resolve();
        }, DRAIN_MS);
      }),
    ]);
    drained
      .then(() => {
        clearTimeout(waited);
        return app.close();
      })
      .then(
        () => {
          log('info', {}, 'shut down cleanly');
          process.exit(code);
        },
        (err: unknown) => {
          log('error', { err }, 'error while shutting down');
          process.exit(1);
        },
      );
  };
  // Before listening: Fastify logs "listening" and then runs its onListen hooks, and a signal that
  // landed in between found no handler and killed the process (exit by signal, not 0).
  process.on('SIGINT', () => shutdown('SIGINT', 0));
  process.on('SIGTERM', () => shutdown('SIGTERM', 0));
  const crashed = (what: string) => (err: unknown) => {
    log('fatal', { err }, `${what}: shutting down`);
    shutdown(what, 1);
  };
  process.on('uncaughtException', crashed('uncaught exception'));
  process.on('unhandledRejection', crashed('unhandled rejection'));
  await app.listen({ port: config.port, host: config.host });
  return app;
}
