import type { FastifyInstance } from 'fastify';
import { AppError } from '../errors.js';
import { sendError } from './errors.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Stops this instance taking requests while those in flight finish (SIGTERM, server.ts). */
    drain: Drain;
  }
}

/** Seconds a request refused while draining is told to wait: another instance answers it now. */
const RETRY_AFTER_S = '1';

const SHUTTING_DOWN = new AppError(
  503,
  'shutting_down',
  'this instance is shutting down; retry, and another instance will answer',
  undefined,
  { 'retry-after': RETRY_AFTER_S, connection: 'close' },
);

/**
 * Draining before a graceful stop (contract 14.2). Once started, every new request, /readyz
 * included, is answered 503 `shutting_down` with Retry-After and Connection: close, at once and
 * while the server still listens (so a load balancer probing /readyz on a new connection sees the
 * 503, not a refused connection); the requests taken in before run to their end, their answers
 * closing their connections; what listens for the start (the live streams) ends. start() resolves
 * when none of those requests is left.
 *
 * Fastify's own 503 while closing carries no Retry-After: the instance is built with
 * return503OnClosing off (http/instance.ts), so a request that races the close lands here too.
 */
export class Drain {
  private draining = false;
  private inFlight = 0;
  private idle: (() => void) | null = null;
  private readonly listeners: (() => void)[] = [];

  /** Whether the drain has started. */
  get started(): boolean {
    return this.draining;
  }

  /** Runs `fn` when the drain starts (a feature ending its long-lived responses). */
  onStart(fn: () => void): void {
    this.listeners.push(fn);
  }

  /** Counts the requests in flight and refuses new ones once draining. Register before any other onRequest hook. */
  register(app: FastifyInstance): void {
    app.decorate('drain', this as Drain);
    // Callback-style: this runs on every request.
    app.addHook('onRequest', (_request, reply, done) => {
      if (this.draining) {
        sendError(reply, SHUTTING_DOWN);
        return;
      }
      this.inFlight++;
      // 'close' comes once the response is sent or its connection has gone, hijacked ones too.
      reply.raw.once('close', this.finished);
      done();
    });
    // An answer sent while draining closes its connection: the client's next request goes elsewhere.
    app.addHook('onSend', (_request, reply, payload, done) => {
      if (this.draining) reply.header('connection', 'close');
      done(null, payload);
    });
  }

  /** Starts draining; resolves once every request taken in before it has finished. */
  start(): Promise<void> {
    if (!this.draining) {
      this.draining = true;
      for (const fn of this.listeners) fn();
    }
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.idle = resolve;
    });
  }

  private readonly finished = (): void => {
    this.inFlight--;
    if (this.draining && this.inFlight === 0) this.idle?.();
  };
}
