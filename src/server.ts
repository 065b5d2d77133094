import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import type { Config } from './config.js';

const SHUTDOWN_GRACE_MS = 10_000;

/**
 * Builds the app, listens, and closes gracefully on SIGINT/SIGTERM: stop accepting, finish
 * in-flight requests, close the store. A second signal, or the grace period running out, exits at once.
 */
export async function start(config: Config): Promise<FastifyInstance> {
  const app = await buildApp(config);
  let closing = false;
  // Logging may fail (stdout gone with its reader); shutting down must not depend on it.
  const log = (level: 'info' | 'warn' | 'error', obj: object, msg: string) => {
    try {
      app.log[level](obj, msg);
    } catch {}
  };
  const shutdown = (signal: NodeJS.Signals) => {
    if (closing) {
      log('warn', { signal }, 'second signal: exiting now');
      process.exit(1);
    }
    closing = true;
    setTimeout(() => {
      log('error', {}, 'shutdown took too long: exiting');
      process.exit(1);
    }, SHUTDOWN_GRACE_MS).unref();
    const closed = app.close();
    log('info', { signal }, 'shutting down: finishing in-flight requests');
    closed.then(
      () => {
        log('info', {}, 'shut down cleanly');
        process.exit(0);
      },
      (err: unknown) => {
        log('error', { err }, 'error while shutting down');
        process.exit(1);
      },
    );
  };
  // Before listening: Fastify logs "listening" and then runs its onListen hooks, and a signal that
  // landed in between found no handler and killed the process (exit by signal, not 0).
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
  await app.listen({ port: config.port, host: config.host });
  return app;
}
