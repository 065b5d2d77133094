import type { ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply } from 'fastify';
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
 * 503, not a refused connection); the requests taken in before run to their end, each answer not
 * yet begun closing its connection; what listens for the start (the live streams) ends. start()
 * resolves when none of those requests is left.
 *
 * Fastify's own 503 while closing carries no Retry-After: the instance is built with
 * return503OnClosing off (http/instance.ts), so a request that races the close lands here too.
 */
export class Drain {
  private draining = false;
  /** The responses of the requests taken in and not yet finished. */
  private readonly open = new Set<ServerResponse>();
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

  /** Makes `app.drain` this drain. Each request must then pass admit() first (app.ts's onRequest). */
  register(app: FastifyInstance): void {
    app.decorate('drain', this as Drain);
  }

  /**
   * Takes a request in and answers true, or, once draining, answers it 503 and false. Called by
   * the app's first onRequest hook: one hook for every request, not one per concern.
   */
  admit(reply: FastifyReply): boolean {
    if (this.draining) {
      sendError(reply, SHUTTING_DOWN);
      return false;
    }
    this.open.add(reply.raw);
    // 'close' comes once the response is sent or its connection has gone, hijacked ones too.
    reply.raw.once('close', this.finished);
    return true;
  }

  /** Starts draining; resolves once every request taken in before it has finished. */
  start(): Promise<void> {
    if (!this.draining) {
      this.draining = true;
      // An answer not yet begun closes its connection: the client's next request goes elsewhere.
      for (const res of this.open) if (!res.headersSent) res.setHeader('connection', 'close');
      for (const fn of this.listeners) fn();
    }
    if (this.open.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.idle = resolve;
    });
  }

  // A response's 'close' listener (called with the response as this): no closure per request.
  private readonly finished: (this: ServerResponse) => void = (() => {
    const drain = this;
    return function (this: ServerResponse) {
      drain.open.delete(this);
      if (drain.draining && drain.open.size === 0) drain.idle?.();
    };
  })();
}
