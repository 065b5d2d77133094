import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { foreignCharset } from '../plants/file-encoding.js';
import { noRoute } from './errors.js';

type Guard = (request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => void;

// JSON and a merge patch are UTF-8 and nothing else (RFC 8259 8.1): a body declared in another
// charset would be read as UTF-8 and stored garbled, so it is refused before it is read. (A CSV or
// NDJSON batch's label is judged by the batch route, with advice on saving a file as UTF-8.)
const UTF8_ONLY = new Set(['application/json', 'application/merge-patch+json']);

/** A 415 unless the request's media type (parameters aside) is one of `types`, in UTF-8 when JSON. */
function requireMediaType(types: string[]): Guard {
  const message = `Content-Type must be ${types.join(' or ')}`;
  return (request, _reply, done) => {
    const header = request.headers['content-type'];
    const type = header?.split(';')[0]?.trim().toLowerCase();
    if (type === undefined || !types.includes(type))
      return done(new AppError(415, 'unsupported_media_type', message));
    const charset = UTF8_ONLY.has(type) ? foreignCharset(header) : null;
    if (charset !== null) {
      const named = JSON.stringify(charset.length > 40 ? `${charset.slice(0, 40)}…` : charset);
      return done(
        new AppError(
          415,
          'unsupported_media_type',
          `${type} must be UTF-8, but Content-Type names the charset ${named}: send the body as UTF-8, with charset=utf-8 or no charset`,
        ),
      );
    }
    done();
  };
}

/** The most a request body may hold, on every route that reads one (413 past it). */
export const BODY_LIMIT = 16 * 1024;

// Run after authentication and before the body is read: the order of checks is 401/403, 415, 413, 400.
export const requireJson = requireMediaType(['application/json']);
/** A batch create takes JSON, CSV or NDJSON (contract 2, POST /plants/batch). */
export const BATCH_MEDIA = ['application/json', 'text/csv', 'application/x-ndjson'];
export const requireBatchMedia = requireMediaType(BATCH_MEDIA);
/** The most a batch create's body may hold (413 past it). */
export const BATCH_BODY_LIMIT = 1024 * 1024;
/** PATCH takes a JSON Merge Patch, labelled as one or as plain JSON. */
export const requireMergePatch = requireMediaType(['application/merge-patch+json', 'application/json']);

// The router matches `/plants/` to `/plants/:id` (and `/gardens//members` to `/gardens/:gid/members`)
// with an empty segment; that path is unknown, so 404 before auth.
export function requireIdSegment(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: (err?: Error) => void,
): void {
  const params = request.params as Record<string, string | undefined>;
  const empty = params.id === '' || params.gid === '' || params.user === '';
  done(empty ? noRoute(request) : undefined);
}

/** Answers 405 with Allow for the methods a known path does not take. */
export function methodNotAllowed(app: FastifyInstance, url: string, allowed: string[]): void {
  const allow = [...allowed, ...(allowed.includes('GET') ? ['HEAD'] : [])].sort();
  const others = app.supportedMethods.filter((m) => !allow.includes(m));
  app.route({
    method: others,
    url,
    schema: { hide: true },
    onRequest: url.includes(':') ? requireIdSegment : undefined,
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      reply.header('allow', allow.join(', '));
      const path = url.replace(':id', '{id}');
      throw new AppError(
        405,
        'method_not_allowed',
        `${request.method} is not allowed on ${path}; use ${allow.join(', ')}`,
      );
    },
  });
}
