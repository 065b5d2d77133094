import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { AppError } from '../errors.js';
import { hasScope } from '../plants/service.js';
import type { RateLimiter } from '../ratelimit/limiter.js';
import type { Scope } from '../schemas/token.js';
import type { Caller, TokenVerifier } from '../tokens/verifier.js';

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller | null;
  }
}

const REALM = 'Bearer realm="plantstore"';
const WINDOW_MS = 60_000;
const BEARER = /^Bearer +([^\s]+) *$/i;

export interface AuthDeps {
  verifier: TokenVerifier;
  limiter: RateLimiter;
  /** Requests per minute per token; 0 is off. */
  rateLimit: number;
  /** Failed authentications per minute per client address; 0 is off. */
  authFailureLimit: number;
}

const seconds = (ms: number) => String(Math.max(1, Math.ceil(ms / 1000)));

function tooMany(resetInMs: number, message: string): AppError {
  return new AppError(429, 'rate_limited', message, undefined, { 'retry-after': seconds(resetInMs) });
}

/**
 * The onRequest hook of every plant route: bearer token (401), per-token rate limit (429),
 * scope (403). It runs before the body is read, so an unauthenticated body is never parsed.
 */
export function authenticate(deps: AuthDeps, scope: Scope): onRequestAsyncHookHandler {
  return async function authHook(request: FastifyRequest, reply: FastifyReply) {
    const header = request.headers.authorization;
    if (header === undefined || header.trim() === '') {
      await countFailure(deps, request);
      throw new AppError(
        401,
        'missing_token',
        'this request needs an Authorization: Bearer token',
        undefined,
        {
          'www-authenticate': REALM,
        },
      );
    }
    const secret = BEARER.exec(header)?.[1];
    const caller = secret === undefined ? null : await deps.verifier.verify(secret);
    if (!caller) {
      await countFailure(deps, request);
      throw new AppError(
        401,
        'invalid_token',
        'the bearer token is malformed, unknown, expired or revoked',
        undefined,
        {
          'www-authenticate': `${REALM}, error="invalid_token"`,
        },
      );
    }
    request.caller = caller;
    if (deps.rateLimit > 0) {
      const hit = await deps.limiter.hit(`token:${caller.tokenId}`, WINDOW_MS);
      reply.header('ratelimit-limit', String(deps.rateLimit));
      reply.header('ratelimit-remaining', String(Math.max(0, deps.rateLimit - hit.count)));
      reply.header('ratelimit-reset', seconds(hit.resetInMs));
      if (hit.count > deps.rateLimit) {
        throw tooMany(
          hit.resetInMs,
          `this token is limited to ${deps.rateLimit} requests a minute; retry later`,
        );
      }
    }
    if (!hasScope(caller, scope)) {
      throw new AppError(403, 'insufficient_scope', `this operation needs the ${scope} scope`, undefined, {
        'www-authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"`,
      });
    }
  };
}

// Counts a failed authentication against the client address; past the limit the answer is 429.
async function countFailure(deps: AuthDeps, request: FastifyRequest): Promise<void> {
  if (deps.authFailureLimit <= 0) return;
  const hit = await deps.limiter.hit(`authfail:${request.ip}`, WINDOW_MS);
  if (hit.count > deps.authFailureLimit) {
    throw tooMany(hit.resetInMs, 'too many failed authentications from this address; retry later');
  }
}
