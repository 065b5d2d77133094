import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import type { ErrorBody } from '../schemas/error.js';
import { validationError } from './validation.js';

// Fastify's own 4xx errors, mapped onto the contract's codes and sentences (JSON parse errors are
// already AppErrors: see json.ts).
const FASTIFY_ERRORS: Record<string, () => AppError> = {
  FST_ERR_CTP_BODY_TOO_LARGE: () =>
    new AppError(413, 'body_too_large', 'request body must be at most 16 KiB'),
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
  if (known) return known();
  const status = err.statusCode ?? 500;
  if (status >= 400 && status < 500) return new AppError(status, 'bad_request', 'the request is malformed');
  return new AppError(500, 'internal_error', 'an unexpected error occurred');
}

export function sendError(reply: FastifyReply, e: AppError): FastifyReply {
  const body: ErrorBody = { error: e.status, code: e.code, message: e.message };
  // A 5xx says nothing of internals; it names the request id so an operator can find the log line.
  if (e.status >= 500) body.message = `${e.message} (request id ${reply.request.id})`;
  if (e.details) body.details = e.details;
  return reply.code(e.status).headers(e.headers).type('application/json; charset=utf-8').send(body);
}

/** One error handler for every failure, and the 404 for unknown routes, both in the contract's shape. */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    const e = toAppError(err, request);
    if (e.status >= 500)
      request.log.error({ err: (e as { cause?: unknown }).cause ?? err }, 'request failed');
    return sendError(reply, e);
  });
  app.setNotFoundHandler((request, reply) =>
    sendError(
      reply,
      new AppError(404, 'not_found', `no route matches ${request.method} ${request.url.split('?')[0]}`),
    ),
  );
}
