import type { Config } from './config.js';
import { Dispatcher, type DispatcherOptions } from './events/dispatcher.js';
import type { Metrics } from './http/metrics.js';
import { IDEMPOTENCY_RETAIN_MS } from './plants/idempotency.js';
import { openStore } from './store/index.js';
import type { Store } from './store/store.js';
import { traceStore } from './store/store-spans.js';
import { tracing } from './telemetry/tracing.js';
import { purgeExpiredTrash } from './trash/purge.js';

type Warn = (obj: object, msg: string) => void;

/** What a process opens the store for: serving HTTP, delivering webhooks, or one command. */
export type Work = 'serve' | 'deliver' | 'command';

// The most PostgreSQL connections each kind of process holds. Serving shares its pool between
// requests, streams and the dispatcher, so the operator sizes it; a deliver process claims while
// it records attempts; a command (migrate, token, backup, a cluster's primary) asks one thing at
// a time.
const POOL_SIZE: Record<Work, (config: Config) => number> = {
  serve: (config) => config.poolSize,
  deliver: () => 2,
  command: () => 1,
};

export interface RuntimeOptions {
  /** A store to use instead of opening config.database; the caller closes it. */
  store?: Store;
  /** Watches the store's pool and operations and the dispatcher's attempts. */
  metrics?: Metrics | null;
  warn?: Warn;
  /** Dispatcher settings beyond the configuration (a resolver; tests' poll and jitter). */
  dispatcher?: Partial<Omit<DispatcherOptions, 'store' | 'warn'>>;
}

/**
 * What a process of plantstore runs on, built from the configuration once: the store (opened and
 * migrated), the webhook dispatcher, and the timers that purge what is no longer kept. Nothing runs
 * in the background until asked (deliver, purge); close stops it all and closes the store.
 */
export class Runtime {
  private sender: Dispatcher | undefined;
  private purger: NodeJS.Timeout | undefined;

  private constructor(
    private readonly config: Config,
    /** The store the services use (instrumented when asked). */
    readonly store: Store,
    /** The migrations this open applied, by name, oldest first. */
    readonly applied: string[],
    /** The store's schema version once migrated. */
    readonly schema: number,
    private readonly owned: Store | null,
    private readonly opts: RuntimeOptions,
  ) {}

  /** Opens (unless given) and migrates the store for this kind of work. */
  static async open(config: Config, work: Work, opts: RuntimeOptions = {}): Promise<Runtime> {
    const raw =
      opts.store ??
      (await openStore({
        url: config.database,
        durability: config.durability,
        poolSize: POOL_SIZE[work](config),
        // A deliver process's claims read the log along its indexes in order (PgOptions.orderedScans).
        orderedScans: work === 'deliver',
      }));
    let applied: string[];
    let schema: number;
    try {
      applied = await raw.migrate();
      schema = await raw.schemaVersion();
    } catch (err) {
      if (!opts.store) await raw.close();
      throw err;
    }
    const { metrics } = opts;
    metrics?.watchPool(raw);
    const timed = metrics ? metrics.instrument(raw) : raw;
    // Traces on (telemetry/tracing.ts): each store operation a client span.
    const traces = tracing();
    const store = traces ? traceStore(timed, traces) : timed;
    return new Runtime(config, store, applied, schema, opts.store ? null : raw, opts);
  }

  /** The webhook dispatcher of this process, made on first use. */
  get dispatcher(): Dispatcher {
    this.sender ??= new Dispatcher({
      store: this.store,
      timeoutMs: this.config.webhookTimeout,
      schedule: this.config.webhookRetrySchedule,
      allowPrivate: this.config.webhookAllowPrivate,
      ...(this.opts.metrics ? { onAttempt: this.opts.metrics.deliveryAttempted } : {}),
      ...(this.opts.warn ? { warn: this.opts.warn } : {}),
      ...this.opts.dispatcher,
    });
    return this.sender;
  }

  /**
   * Sends webhook deliveries until closed. Events committed by this process wake the dispatcher at
   * once, and other processes' as the store hears of them (onEvents); its poll is the safety net.
   */
  deliver(): void {
    const dispatcher = this.dispatcher;
    this.store.onEvents(() => dispatcher.nudge());
    dispatcher.start();
  }

  /**
   * Purges, until closed, the idempotency keys and events older than they are kept, and the trash
   * entries whose time has come (in batches, one instance at a time: trash/purge.ts).
   */
  purge(): void {
    const warn = this.opts.warn ?? (() => {});
    const { eventRetention, trashRetention } = this.config;
    const shortest = trashRetention > 0 ? Math.min(eventRetention, trashRetention) : eventRetention;
    const every = Math.min(3_600_000, Math.max(1_000, shortest / 10));
    let trashing = false;
    this.purger = setInterval(() => {
      const now = Date.now();
      // Entries made while the trash was on still go when due, whatever the retention is now.
      if (!trashing) {
        trashing = true;
        purgeExpiredTrash(this.store, new Date(now))
          .catch((err) => warn({ err }, 'could not purge the trash'))
          .finally(() => {
            trashing = false;
          });
      }
      this.store.purgeIdempotencyKeys(new Date(now - IDEMPOTENCY_RETAIN_MS)).catch((err) => {
        warn({ err }, 'could not purge old idempotency keys');
      });
      this.store.purgeEvents(new Date(now - this.config.eventRetention)).catch((err) => {
        warn({ err }, 'could not purge old events');
      });
    }, every);
    this.purger.unref();
  }

  /** Stops purging and claiming, waits for the deliveries in flight, closes the store it opened. */
  async close(): Promise<void> {
    clearInterval(this.purger);
    await this.sender?.stop();
    await this.owned?.close();
  }
}
