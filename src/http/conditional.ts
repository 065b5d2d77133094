import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError, PreconditionFailedError } from '../errors.js';
import { etagOf, parseEtags } from '../plants/etag.js';

// Conditional requests (RFC 9110 §13) as HTTP speaks them: the ETag sent, If-None-Match answered
// with 304, If-Match required (428) or read. Whether an If-Match still names the current version
// (else 412) is decided where the change is made, in the same step as the change itself.

type Versions = ReturnType<typeof parseEtags>;

/** Names the version an answer shows in its ETag. */
export function setEtag(reply: FastifyReply, version: number): FastifyReply {
  return reply.header('etag', etagOf(version));
}

/**
 * A read's answer under its ETag: `body`, or 304 with no body when If-None-Match names the
 * current version (or is `*`).
 */
export function readWithEtag<T>(
  request: FastifyRequest,
  reply: FastifyReply,
  version: number,
  body: T,
): T | FastifyReply {
  setEtag(reply, version);
  const held = request.headers['if-none-match'];
  if (held === undefined) return body;
  const versions = parseEtags(held);
  if (versions !== '*' && !versions.includes(version)) return body;
  // No payload at all: Fastify then sends neither a body nor Content-Length/Type.
  return reply.code(304).send(undefined as unknown as null);
}

/** Whether If-None-Match names `etag` (or is `*`), by the weak comparison RFC 9110 13.1.2 asks of it. */
export function noneMatch(request: FastifyRequest, etag: string): boolean {
  const header = request.headers['if-none-match'];
  if (header === undefined) return false;
  if (header.trim() === '*') return true;
  return header.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag);
}

/** The versions an optional If-Match names; undefined without one. */
export function ifMatch(request: FastifyRequest): Versions | undefined {
  const header = request.headers['if-match'];
  return header === undefined ? undefined : parseEtags(header);
}

/** The versions If-Match names, for a change that needs one: 428 without it. */
export function requireIfMatch(request: FastifyRequest): Versions {
  const versions = ifMatch(request);
  if (versions === undefined) {
    throw new AppError(
      428,
      'precondition_required',
      'If-Match is required: send the ETag of the plant as you read it (or *)',
    );
  }
  return versions;
}

/**
 * A 412's error, said for what the client sent: an If-Match holding something that is not an ETag
 * (`3` or `W/"3"` where the plant's ETag is `"3"`) never matches, and the client needs to hear that
 * rather than "the plant has changed". Any other error is returned as it is.
 */
export function explainPrecondition(request: FastifyRequest, err: unknown): unknown {
  const header = request.headers['if-match'];
  if (!(err instanceof PreconditionFailedError) || header === undefined) return err;
  const odd = header
    .split(',')
    .map((part) => part.trim())
    .find((part) => !/^"[^"]*"$/.test(part));
  if (odd === undefined) return err;
  const shown = odd.length > 40 ? `${odd.slice(0, 40)}…` : odd;
  const digits = /^(?:W\/)?"?([0-9]{1,16})"?$/.exec(odd)?.[1];
  const example = digits === undefined ? '"3"' : `"${digits}"`;
  return new PreconditionFailedError(
    `If-Match must hold the ETag exactly as the service sent it, quotes included (If-Match: ${example}), or *; the value ${shown} is not, so it matched no version of the plant and nothing changed`,
  );
}
