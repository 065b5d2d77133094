import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, type ErrorCode } from '../errors.js';
import type { ErrorBody } from '../schemas/error.js';
import { validationError } from './validation.js';

/** A byte count as a limit is stated: "16 KiB", "1 MiB" (whole units where it divides). */
export function byteSize(bytes: number): string {
  for (const [unit, size] of [
    ['MiB', 1024 * 1024],
    ['KiB', 1024],
  ] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size} ${unit}`;
  }
  return `${bytes} bytes`;
}

// Fastify's own 4xx errors, mapped onto the contract's codes and sentences (JSON parse errors are
// already AppErrors: see json.ts).
const FASTIFY_ERRORS: Record<string, (request: FastifyRequest) => AppError> = {
  // The route's own limit (the batch create's is 1 MiB), which its content-type parsers share.
  FST_ERR_CTP_BODY_TOO_LARGE: (request) =>
    new AppError(
      413,
      'body_too_large',
      `request body must be at most ${byteSize(request.routeOptions.bodyLimit)}`,
    ),
  FST_ERR_CTP_INVALID_MEDIA_TYPE: () =>
    new AppError(415, 'unsupported_media_type', 'Content-Type must be application/json'),
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: () =>
    new AppError(400, 'bad_request', 'Content-Length does not match the request body'),
};

function toAppError(err: FastifyError, request: FastifyRequest): AppError {
  if (err instanceof AppError) return err;
  if (err.validation) {
    return validationError(err.validation, err.validationContext, {
      body: request.body,
      query: request.query,
      params: request.params,
      headers: request.headers,
    });
  }
  const known = err.code ? FASTIFY_ERRORS[err.code] : undefined;
  if (known) return known(request);
  const status = err.statusCode ?? 500;
  if (status >= 400 && status < 500) return new AppError(status, 'bad_request', 'the request is malformed');
  return new AppError(500, 'internal_error', 'an unexpected error occurred');
}

export function sendError(reply: FastifyReply, e: AppError): FastifyReply {
  const body: ErrorBody = { error: e.status, code: e.code, message: e.message };
  // A 5xx says nothing of internals; it names the request id so an operator can find the log line.
  if (e.status >= 500) body.message = `${e.message} (request id ${reply.request.id})`;
  if (e.details) body.details = e.details;
  // An oversized body is not read any further: the connection closes once the 413 is sent.
  if (e.status === 413) {
    reply.header('connection', 'close');
    const socket = reply.raw.socket;
    if (socket) lingerOnClose(socket);
  }
  return reply.code(e.status).headers(e.headers).type('application/json; charset=utf-8').send(body);
}

/** The 404 of a path no route takes. */
export const noRoute = (request: FastifyRequest): AppError =>
  new AppError(404, 'not_found', `no route matches ${request.method} ${request.url.split('?')[0]}`);

/** One error handler for every failure, and the 404 for unknown routes, both in the contract's shape. */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    const e = toAppError(err, request);
    if (e.status >= 500)
      request.log.error({ err: (e as { cause?: unknown }).cause ?? err }, 'request failed');
    return sendError(reply, e);
  });
  app.setNotFoundHandler((request, reply) => sendError(reply, noRoute(request)));
}

/**
 * What Fastify's router refuses before any hook or handler runs (Fastify's `frameworkErrors`): a
 * path that is not valid percent-encoding, a path parameter over the router's length limit. They
 * get the contract's error body and the request id, as every other error does.
 */
export function frameworkErrorHandler(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  let e: AppError;
  if (err.code === 'FST_ERR_BAD_URL') {
    e = new AppError(
      400,
      'bad_request',
      'the request path is not valid: a % must begin a percent-encoded byte',
    );
  } else if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    e = new AppError(414, 'uri_too_long', 'a path segment is too long');
  } else {
    request.log.error({ err }, 'request failed');
    e = new AppError(500, 'internal_error', 'an unexpected error occurred');
  }
  reply.header('x-request-id', request.id);
  sendError(reply, e);
}

type ClientError = [status: number, code: ErrorCode, message: string];

const CLIENT_ERRORS: Record<string, ClientError> = {
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'request_timeout', 'the request was not received in time'],
  HPE_HEADER_OVERFLOW: [431, 'headers_too_large', 'request headers must be at most 16 KiB'],
};
const NOT_HTTP: ClientError = [400, 'malformed_request', 'the request is not valid HTTP/1.1'];

/**
 * Answers what Node's HTTP parser refuses before Fastify sees a request (bytes that are not
 * HTTP/1.1, headers over 16 KiB, a client too slow to send its request) with the contract's error
 * body, then closes the connection.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, message] = CLIENT_ERRORS[err.code ?? ''] ?? NOT_HTTP;
  // As Node does: answer only if no response has started on this socket (never corrupt one).
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    const body = JSON.stringify({ error: status, code, message } satisfies ErrorBody);
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${randomUUID()}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

const LINGER_MS = 2_000;
const LINGER_BYTES = 8 * 1024 * 1024;

/**
 * A lingering close for a connection whose client is still sending a body the server refused:
 * closing at once would reset the connection and a client still uploading could lose the 413
 * sent just before. So the server half-closes after the answer and discards what still arrives,
 * for at most 2 s or 8 MiB, then closes (what nginx's lingering_close does). Nothing is buffered.
 */
function lingerOnClose(socket: Socket): void {
  // Node calls destroySoon() once the response is finished on a connection that is not kept alive.
  socket.destroySoon = function (this: Socket) {
    this.end();
    const start = this.bytesRead;
    const stop = () => {
      clearInterval(check);
      clearTimeout(timer);
      this.destroy();
    };
    const check = setInterval(() => {
      if (this.bytesRead - start > LINGER_BYTES) stop();
    }, 50);
    const timer = setTimeout(stop, LINGER_MS);
    check.unref();
    timer.unref();
    this.once('close', stop);
  };
}
