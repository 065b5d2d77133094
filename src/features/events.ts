import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { EventService } from '../events/service.js';
import type { AuthDeps } from '../http/auth.js';
import type { Drain } from '../http/drain.js';
import type { Metrics } from '../http/metrics.js';
import { eventRoutes } from '../routes/events.js';
import type { Runtime } from '../runtime.js';
import type { Tag } from './docs.js';

export const EVENT_TAGS: Tag[] = [
  { name: 'events', description: 'The live stream of plant events (Server-Sent Events)' },
];

export interface EventsOptions {
  events: EventService;
  auth: AuthDeps;
  /** Whose dispatcher sends webhook deliveries and whose timers purge old events. */
  runtime: Runtime;
  /** Whether this process sends webhook deliveries (`serve --no-webhook-delivery`: not). */
  deliver: boolean;
  metrics: Metrics | null;
  /** Ends the streams when the instance starts draining (SIGTERM). */
  drain?: Drain;
}

/**
 * Plant events: the live stream (GET /events), and this process's background work on the log:
 * webhook delivery and the purge of what is no longer kept.
 */
export function eventsFeature(opts: EventsOptions): FastifyPluginAsync {
  const { events, runtime } = opts;
  return async (app: FastifyInstance) => {
    opts.metrics?.watchStreams(() => events.openCount);
    if (opts.deliver) runtime.deliver();
    runtime.purge();
    // Streams would hold the server open: end them cleanly when it starts draining (SIGTERM; their
    // clients resume elsewhere with Last-Event-ID), and any still open when it closes.
    opts.drain?.onStart(() => events.closeAll());
    app.addHook('preClose', (done) => {
      events.closeAll();
      done();
    });
    await app.register(eventRoutes(events, opts.auth));
  };
}
