import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { FastifyInstance } from 'fastify';
import { AppError } from '../errors.js';
import { errorResponses } from '../schemas/error.js';
import { sendError } from './errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Answer 503 `overloaded` rather than run while the event loop is behind (registerLoadShedding). */
    shedUnderPressure?: boolean;
  }
}

/** Route options of a path that is shed first: one that needs no token and costs more than a health check. */
export const SHED = { config: { shedUnderPressure: true } } as const;

const { 'x-request-id': requestId, 'retry-after': retryAfter } = (
  errorResponses(503)[503] as { headers: Record<string, unknown> }
).headers;

/** The 503 a shed route may answer, for its response schema (JSON even where the route produces text). */
export const SHED_RESPONSE = {
  503: {
    description:
      'The event loop is behind (`overloaded`): paths that need no token are shed until it catches up; see Retry-After.',
    headers: { 'x-request-id': requestId, 'retry-after': retryAfter },
    content: { 'application/json': { schema: { $ref: 'Error' } } },
  },
};

const SAMPLE_MS = 1000;
const RESOLUTION_MS = 10;
/** Seconds a shed request is told to wait: the delay is measured once a second. */
const RETRY_AFTER_S = '2';

const OVERLOADED = new AppError(
  503,
  'overloaded',
  'the service is overloaded; try again shortly',
  undefined,
  {
    'retry-after': RETRY_AFTER_S,
  },
);

/**
 * Load shedding: while the mean event-loop delay has been past `maxDelayMs` in each of the last
 * two seconds, the routes marked SHED answer 503 `overloaded` with Retry-After at once. Two
 * seconds, not one: a single long block (the first /docs loading Scalar's bundle, a long GC) is
 * one sample of its whole length and fills a second's mean by itself, and it would shed the very
 * requests that follow it (the reference page's own script and document); a loop that is behind
 * stays behind. Every other route runs as
 * usual: the API (its callers hold tokens and are rate limited), /healthz (the process is up) and
 * /readyz (the store answers). 0: off.
 *
 * The same measure as @fastify/under-pressure's maxEventLoopDelay, but started once the app is
 * ready: that plugin measures from its registration, so the start-up's schema compilation (seconds,
 * on a busy machine) read as lag and shed the first second after every start.
 */
export function registerLoadShedding(app: FastifyInstance, maxDelayMs: number): void {
  if (maxDelayMs <= 0) return;
  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  // Seconds in a row whose mean delay was past the limit.
  let secondsBehind = 0;
  let timer: NodeJS.Timeout | undefined;
  app.addHook('onReady', (done) => {
    histogram.enable();
    timer = setInterval(() => {
      // No sample at all in a second means the loop never turned: as far behind as can be.
      const mean = histogram.count === 0 ? Number.POSITIVE_INFINITY : histogram.mean / 1e6;
      secondsBehind = mean - RESOLUTION_MS > maxDelayMs ? secondsBehind + 1 : 0;
      histogram.reset();
    }, SAMPLE_MS).unref();
    done();
  });
  app.addHook('onClose', (_app, done) => {
    clearInterval(timer);
    histogram.disable();
    done();
  });
  // Answered here, not thrown: a shed request costs no error log line (the error handler logs 5xx).
  app.addHook('onRequest', (request, reply, done) => {
    if (secondsBehind < 2 || request.routeOptions.config.shedUnderPressure !== true) return done();
    sendError(reply, OVERLOADED);
  });
}
