import { resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { DestinationStream } from 'pino';
import type { Config } from './config.js';
import type { DispatcherOptions } from './events/dispatcher.js';
import type { Resolver } from './events/outbound.js';
import { EventService } from './events/service.js';
import type { StreamOptions } from './events/stream.js';
import { consoleFeature } from './features/console.js';
import { docsFeature } from './features/docs.js';
import { EVENT_TAGS, eventsFeature } from './features/events.js';
import { GARDEN_TAGS, gardensFeature } from './features/gardens.js';
import { historyFeature } from './features/history.js';
import { IDENTITY_TAGS, identity } from './features/identity.js';
import { OPS_TAGS, opsFeature } from './features/ops.js';
import { PLANT_TAGS, plantsFeature } from './features/plants.js';
import { TRASH_TAGS, trashFeature } from './features/trash.js';
import { WEBHOOK_TAGS, webhooksFeature } from './features/webhooks.js';
import { GardenService } from './gardens/service.js';
import { Drain } from './http/drain.js';
import { registerErrorHandling } from './http/errors.js';
import { fastifyInstance } from './http/instance.js';
import { registerBodyParsers } from './http/json.js';
import { Metrics } from './http/metrics.js';
import { registerLoadShedding } from './http/pressure.js';
import { registerQueryCheck } from './http/query.js';
import { BODY_LIMIT } from './http/route-guards.js';
import { BackupSchedule } from './ops/backups.js';
import { MemoryRateLimiter, type RateLimiter } from './ratelimit/limiter.js';
import { RedisRateLimiter } from './ratelimit/redis.js';
import { Runtime } from './runtime.js';
import { sqlitePath } from './store/index.js';
import type { Store } from './store/store.js';
import { startTracing } from './telemetry/tracing.js';

export interface AppDeps {
  /** A store to use instead of opening config.database; the caller closes it. */
  store?: Store;
  limiter?: RateLimiter;
  /** Where JSON logs go (default stdout). */
  logStream?: DestinationStream;
  /** How long a verified token is trusted before the store is asked again (default 2 s). */
  tokenCacheMs?: number;
  /** How long token uses gather before lastUsedAt is written (default 1 s). */
  lastUsedFlushMs?: number;
  /** The clock JWTs are checked against (default Date.now). */
  clock?: () => number;
  /** Resolves webhook host names (tests map names to addresses of their own). */
  resolver?: Resolver;
  /** Webhook dispatcher settings beyond the configuration (tests: poll interval, jitter). */
  dispatcher?: Partial<
    Pick<DispatcherOptions, 'pollMs' | 'jitter' | 'concurrency' | 'perEndpoint' | 'clock'>
  >;
  /** Live stream settings (tests: heartbeat, buffer bound). */
  streams?: StreamOptions;
}

/** The one Fastify instance used by `serve` and by the tests: cross-cutting plugins, then the features. */
export async function buildApp(config: Config, deps: AppDeps = {}): Promise<FastifyInstance> {
  // Before the logger and the store: both are traced when the OTEL_* variables ask (contract 14.1).
  const traces = await startTracing();
  const app = fastifyInstance(config, BODY_LIMIT, deps.logStream);
  // First of all hooks: the request's server span is the parent of everything it does.
  traces?.instrument(app);
  const warn = (obj: object, msg: string) => app.log.warn(obj, msg);
  const metrics = config.metrics ? new Metrics() : null;
  const runtime = await Runtime.open(config, 'serve', {
    ...(deps.store ? { store: deps.store } : {}),
    metrics,
    warn,
    dispatcher: { ...(deps.resolver ? { resolver: deps.resolver } : {}), ...deps.dispatcher },
  });
  const { store } = runtime;
  const limiter =
    deps.limiter ?? (config.redisUrl ? new RedisRateLimiter(config.redisUrl) : new MemoryRateLimiter());
  // Registered first, so it runs last: every feature has let go of the store by then.
  app.addHook('onClose', async () => {
    if (!deps.limiter) await limiter.close();
    await runtime.close();
    await traces?.shutdown();
  });
  const drain = new Drain();
  drain.register(app);
  // The first hook of every request: its id on the answer, and the drain's count of what is in
  // flight (or its 503 once draining). One callback-style hook (not async, not one per concern):
  // each hook Fastify runs costs every request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    if (drain.admit(reply)) done();
  });
  app.decorateRequest('caller', null);
  registerErrorHandling(app);
  registerBodyParsers(app);
  registerQueryCheck(app);
  registerLoadShedding(app, config.maxEventLoopDelay);
  metrics?.observe(app);
  const tags = [
    ...PLANT_TAGS,
    ...TRASH_TAGS,
    ...GARDEN_TAGS,
    ...WEBHOOK_TAGS,
    ...EVENT_TAGS,
    ...IDENTITY_TAGS,
    ...OPS_TAGS,
  ];
  await app.register(docsFeature(config, tags));

  const {
    auth,
    feature: identityFeature,
    tokenUsed,
  } = identity(config, { store, limiter, metrics, log: app.log }, deps);
  const gardens = new GardenService(store);
  const streams = { warn, maxPerUser: config.maxStreamsPerUser, tokenUsed, ...deps.streams };
  const events = new EventService(store, gardens, streams);
  // The streams hear of commits from the store (onEvents): this process's at once, others' soon after.
  await app.register(
    plantsFeature({
      store,
      gardens,
      auth,
      listCacheBytes: config.listCache * 1024 * 1024,
      exports: { perUser: config.maxExportsPerUser, total: config.maxExports },
      trashRetention: config.trashRetention,
    }),
  );
  await app.register(trashFeature(store, gardens, auth));
  await app.register(gardensFeature(gardens, auth));
  await app.register(historyFeature(store, gardens, auth));
  await app.register(identityFeature);
  const allowPrivate = config.webhookAllowPrivate;
  await app.register(webhooksFeature({ store, auth, allowPrivate, resolver: deps.resolver }));
  await app.register(
    eventsFeature({ events, auth, runtime, deliver: config.webhookDelivery, metrics, drain }),
  );
  await app.register(opsFeature(store, runtime.schema, metrics));
  if (config.console) await app.register(consoleFeature(config));
  if (config.backupDir) {
    const backups = new BackupSchedule({
      source: resolve(sqlitePath(config.database)),
      dir: resolve(config.backupDir),
      everyMs: config.backupEvery,
      keep: config.backupKeep,
      log: app.log,
      ...(metrics ? { onBackup: metrics.backupTaken, onFailure: metrics.backupFailed } : {}),
    });
    backups.start();
    // Before the store closes (hooks run last-registered first): a backup under way finishes.
    app.addHook('onClose', () => backups.stop());
  }
  return app;
}
