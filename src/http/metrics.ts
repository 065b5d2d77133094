import type { FastifyInstance } from 'fastify';
import { Counter, collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import type { KeyFetchOutcome } from '../identity/issuer-keys.js';
import type { Refusal } from '../identity/refusal.js';
import type { AttemptOutcome, Store } from '../store/store.js';
import { FastHistogram } from './fast-histogram.js';
import { scrapeOf } from './metrics-cluster.js';

const TIMED = [
  'createPlant',
  'createPlants',
  'getPlant',
  'plantFor',
  'listPlants',
  'updatePlant',
  'deletePlant',
  'listTrash',
  'restorePlant',
  'purgeTrashed',
  'purgeExpiredTrash',
  'homeGarden',
  'gardensOf',
  'memberships',
  'gardenFor',
  'createGarden',
  'renameGarden',
  'deleteGarden',
  'listMembers',
  'putMember',
  'removeMember',
  'membersOf',
  'claimIdempotencyKey',
  'releaseIdempotencyKey',
  'purgeIdempotencyKeys',
  'insertToken',
  'findTokenByHash',
  'findToken',
  'activeTokens',
  'pageTokens',
  'revokeToken',
  'touchTokens',
  'insertEndpoint',
  'listEndpoints',
  'getEndpoint',
  'updateEndpoint',
  'deleteEndpoint',
  'claimDeliveries',
  'finishDeliveries',
  'renewLeases',
  'renewQueuedLeases',
  'listAttempts',
  'recoverDeliveries',
  'eventPosition',
  'headPosition',
  'readEvents',
  'plantHistory',
  'gardenActivity',
  'purgedUpTo',
  'memberEventGardens',
  'committedEvents',
  'deletedPlantIds',
  'plantsByIds',
  'purgeEvents',
  'ping',
] as const satisfies readonly (keyof Store)[];
// Operations an engine may lack (the feed then reads the others one by one; a page is read as rows
// and serialized here): timed when it has them. Left out, an engine's one-statement form would be
// lost behind this wrapper.
const TIMED_OPTIONAL = [
  'feedStart',
  'feedLog',
  'listTrashJson',
  'plantHistoryJson',
  'gardenActivityJson',
] as const satisfies readonly (keyof Store)[];

/** Per-app Prometheus registry: request counts and latency by route and status, store latency. */
export class Metrics {
  readonly registry = new Registry();
  readonly http = new FastHistogram(
    this.registry,
    'plantstore_http_request_duration_seconds',
    'HTTP request latency by method, route and status',
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    { name: 'plantstore_http_requests_total', help: 'HTTP requests by method, route and status' },
  );
  readonly storeLatency = new FastHistogram(
    this.registry,
    'plantstore_store_operation_duration_seconds',
    'Store operation latency by operation and outcome',
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5],
  );

  // Labels are fixed vocabularies (identity/refusal.ts): no token content ever becomes a label.
  private readonly authFailures = new Counter({
    name: 'plantstore_auth_failures_total',
    help: 'Refused authentications by kind of bearer value (builtin, jwt, none) and reason',
    labelNames: ['kind', 'reason'] as const,
    registers: [this.registry],
  });
  private readonly keyFetches = new Counter({
    name: 'plantstore_jwt_key_fetches_total',
    help: "Fetches of the JWT issuer's key set (discovery included) by outcome",
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'plantstore_' });
  }

  /** The text of a scrape: under `serve --workers N`, every worker's metrics summed (metrics-cluster.ts). */
  readonly scrape = scrapeOf(this.registry);

  private readonly deliveries = new Counter({
    name: 'plantstore_webhook_attempts_total',
    help: 'Webhook delivery attempts by outcome (succeeded, retrying, failed)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly deliveryAttempted = (outcome: AttemptOutcome): void => this.deliveries.inc({ outcome });

  private readonly tokenChanges = new Counter({
    name: 'plantstore_token_changes_total',
    help: 'Built-in tokens created and revoked by this process (action: created, revoked)',
    labelNames: ['action'] as const,
    registers: [this.registry],
  });
  readonly tokenChanged = (action: 'created' | 'revoked'): void => this.tokenChanges.inc({ action });

  // Scheduled backups (contract section 12).
  private readonly backupLast = new Gauge({
    name: 'plantstore_backup_last_success_timestamp_seconds',
    help: 'When the last scheduled backup this process took checked good (Unix time)',
    registers: [this.registry],
    // Across workers: the latest of them, not their sum.
    aggregator: 'max',
  });
  private readonly backupFailures = new Counter({
    name: 'plantstore_backup_failures_total',
    help: 'Scheduled backups this process tried that failed',
    registers: [this.registry],
  });
  private readonly backupSize = new Gauge({
    name: 'plantstore_backup_bytes',
    help: 'Size of the last scheduled backup this process took',
    registers: [this.registry],
  });
  readonly backupTaken = (made: { bytes: number }): void => {
    this.backupLast.set(Date.now() / 1000);
    this.backupSize.set(made.bytes);
  };
  readonly backupFailed = (): void => this.backupFailures.inc();

  /** Reports the live event streams open in this process. */
  watchStreams(open: () => number): void {
    new Gauge({
      name: 'plantstore_event_streams_open',
      help: 'Live event streams (GET /events) open in this process',
      registers: [this.registry],
      collect() {
        this.set(open());
      },
    });
  }

  readonly authRefused = (r: Refusal): void => this.authFailures.inc({ kind: r.kind, reason: r.refused });
  readonly keyFetched = (outcome: KeyFetchOutcome): void => this.keyFetches.inc({ outcome });

  /** Reports the store's connection pool, for engines that pool. */
  watchPool(store: Store): void {
    if (!store.poolStats) return;
    const stats = store.poolStats.bind(store);
    new Gauge({
      name: 'plantstore_store_pool_connections',
      help: 'Store connections by state: open (total), idle, and requests waiting for one',
      labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        const s = stats();
        this.set({ state: 'open' }, s.size);
        this.set({ state: 'idle' }, s.idle);
        this.set({ state: 'waiting' }, s.waiting);
      },
    });
  }

  /** Records every response once it is sent. */
  observe(app: FastifyInstance): void {
    const http = this.http;
    app.addHook('onResponse', (request, reply, done) => {
      const method = request.method;
      const route = request.routeOptions.url ?? 'unmatched';
      const status = reply.statusCode;
      http.observe(
        `${method} ${route} ${status}`,
        () => ({ method, route, status: String(status) }),
        reply.elapsedTime / 1000,
      );
      done();
    });
  }

  /** The store with each operation timed; the wrappers are made once, not per call. */
  instrument(store: Store): Store {
    // Every method runs on the real store (never on this wrapper), so engine state stays in one place.
    const timed: Record<string, unknown> = {
      engine: store.engine,
      migrate: store.migrate.bind(store),
      migrationsPending: store.migrationsPending.bind(store),
      schemaVersion: store.schemaVersion.bind(store),
      close: store.close.bind(store),
      poolStats: store.poolStats?.bind(store),
      listMarks: store.listMarks?.bind(store),
      scopeMarks: store.scopeMarks?.bind(store),
      onEvents: store.onEvents.bind(store),
      comparePositions: store.comparePositions.bind(store),
      // An async iterable, not a promise: its pages are timed by nothing here.
      exportPlants: store.exportPlants.bind(store),
    };
    const present = TIMED_OPTIONAL.filter((name) => store[name] !== undefined);
    for (const name of [...TIMED, ...present]) {
      const fn = store[name] as (...args: unknown[]) => Promise<unknown>;
      const hist = this.storeLatency;
      const ok = () => ({ operation: name, outcome: 'ok' });
      const failed = () => ({ operation: name, outcome: 'error' });
      timed[name] = async (...args: unknown[]) => {
        const start = performance.now();
        try {
          const r = await fn.apply(store, args);
          hist.observe(`${name} ok`, ok, (performance.now() - start) / 1000);
          return r;
        } catch (err) {
          hist.observe(`${name} error`, failed, (performance.now() - start) / 1000);
          throw err;
        }
      };
    }
    return timed as unknown as Store;
  }
}
