import type { Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
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
 * resolves when every connection open at the start has closed: an idle keep-alive one at once, one
 * with a request in flight once its answer is sent.
 *
 * It follows connections, not requests: a listener per connection (a keep-alive client's many
 * requests share one) rather than a listener and an entry per request, which every request paid
 * for, in CPU and in the garbage collector's work on the responses they held.
 *
 * Fastify's own 503 while closing carries no Retry-After: the instance is built with
 * return503OnClosing off (http/instance.ts), so a request that races the close lands here too.
 */
export class Drain {
  private draining = false;
  /** The server's open connections. */
  private readonly sockets = new Set<Socket>();
  /** Those open when the drain started; it ends when none is left. */
  private pending: Set<Socket> | null = null;
  private server: Server | null = null;
  private reaper: NodeJS.Timeout | undefined;
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

  /** Makes `app.drain` this drain and follows the server's connections. Requests pass admit(). */
  register(app: FastifyInstance): void {
    app.decorate('drain', this as Drain);
    this.server = app.server;
    app.server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.closed(socket));
    });
  }

  /**
   * Takes a request in and answers true, or, once draining, answers it 503 and false. Called by
   * the app's first onRequest hook: one hook for every request, not one per concern.
   */
  admit(reply: FastifyReply): boolean {
    if (!this.draining) return true;
    sendError(reply, SHUTTING_DOWN);
    return false;
  }

  /** Starts draining; resolves once every connection open at the start has closed. */
  start(): Promise<void> {
    if (!this.draining) {
      this.draining = true;
      this.pending = new Set(this.sockets);
      // An answer not yet begun closes its connection: the client's next request goes elsewhere.
      // (The response a connection is answering: Node's socket._httpMessage.)
      for (const socket of this.pending) {
        const res = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
        if (res && !res.headersSent) res.setHeader('connection', 'close');
      }
      for (const fn of this.listeners) fn();
      // Keep-alive connections between requests close now; those answering close once their
      // answer is sent (or idle after it: closed on the next pass).
      this.server?.closeIdleConnections();
      this.reaper = setInterval(() => this.server?.closeIdleConnections(), 50);
      this.reaper.unref();
    }
    if (this.pending === null || this.pending.size === 0) return this.done();
    return new Promise((resolve) => {
      this.idle = resolve;
    });
  }

  private closed(socket: Socket): void {
    this.sockets.delete(socket);
    if (this.pending?.delete(socket) && this.pending.size === 0) {
      clearInterval(this.reaper);
      this.idle?.();
    }
  }

  private done(): Promise<void> {
    clearInterval(this.reaper);
    return Promise.resolve();
  }
}
