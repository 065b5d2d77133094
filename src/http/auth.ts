import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { AppError } from '../errors.js';
import type { BearerVerifier } from '../identity/bearer.js';
import { type Caller, hasScope } from '../identity/caller.js';
import { isRefusal, type Refusal, refusal, type Verdict } from '../identity/refusal.js';
import type { RateLimiter } from '../ratelimit/limiter.js';
import type { Scope } from '../schemas/token.js';

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller | null;
  }
}

const REALM = 'Bearer realm="plantstore"';
const WINDOW_MS = 60_000;
const BEARER = /^Bearer +([^\s]+) *$/i;

export interface AuthDeps {
  verifier: BearerVerifier;
  /** With JWTs on: the RFC 9728 metadata URL for this request, named in every 401 challenge. */
  resourceMetadata?: ((request: FastifyRequest) => string) | null;
  /** The OpenAPI security requirement of every route behind this hook: which bearer kinds work. */
  security: Record<string, string[]>[];
  /** Told of every refused authentication, for metrics. */
  onRefusal?: ((r: Refusal) => void) | null;
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

const MISSING = refusal('none', 'missing');
const MALFORMED_HEADER = refusal('none', 'malformed');

// RFC 9728 5.1: the challenge names the resource metadata after the RFC 6750 parameters.
const challenge = (params: string, metadata: string | null) =>
  metadata === null ? `${REALM}${params}` : `${REALM}${params}, resource_metadata="${metadata}"`;

const missingToken = (metadata: string | null) =>
  new AppError(401, 'missing_token', 'this request needs an Authorization: Bearer token', undefined, {
    'www-authenticate': challenge('', metadata),
  });

const invalidToken = (metadata: string | null) =>
  new AppError(
    401,
    'invalid_token',
    'the bearer token is malformed, unknown, expired or revoked',
    undefined,
    { 'www-authenticate': challenge(', error="invalid_token"', metadata) },
  );

type Done = (err?: Error) => void;

// Runs `then` on a value that may or may not be a promise: no promise, no microtask.
function settle<T>(value: T | Promise<T>, then: (v: T) => void, failed: Done): void {
  if (value instanceof Promise) value.then(then, failed);
  else then(value);
}

/**
 * The onRequest hook of every plant route: bearer token (401), per-token rate limit (429),
 * scope (403). It runs before the body is read, so an unauthenticated body is never parsed.
 * Callback-style: with a cached token and the in-memory limiter, nothing here waits on a promise.
 * A null `scope` admits any valid token. `fresh`: a built-in token is looked up in the store even
 * when it was checked a moment ago.
 */
export function authenticate(
  deps: AuthDeps,
  scope: Scope | null,
  opts: { fresh?: boolean } = {},
): onRequestHookHandler {
  const fresh = opts.fresh === true;
  const metadata = deps.resourceMetadata ?? null;
  // Counts a failed authentication against the client address; past the limit the answer is 429.
  const refuse = (request: FastifyRequest, why: Refusal, done: Done): void => {
    deps.onRefusal?.(why);
    const url = metadata ? metadata(request) : null;
    const err = why === MISSING ? missingToken(url) : invalidToken(url);
    if (deps.authFailureLimit <= 0) {
      done(err);
      return;
    }
    settle(
      deps.limiter.hit(`authfail:${request.ip}`, WINDOW_MS),
      (hit) =>
        done(
          hit.count > deps.authFailureLimit
            ? tooMany(hit.resetInMs, 'too many failed authentications from this address; retry later')
            : err,
        ),
      done,
    );
  };

  const checkScope = (caller: Caller, done: Done): void =>
    done(
      scope === null || hasScope(caller, scope)
        ? undefined
        : new AppError(403, 'insufficient_scope', `this operation needs the ${scope} scope`, undefined, {
            'www-authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"`,
          }),
    );

  const admit = (request: FastifyRequest, reply: FastifyReply, caller: Verdict, done: Done): void => {
    if (isRefusal(caller)) {
      refuse(request, caller, done);
      return;
    }
    request.caller = caller;
    if (deps.rateLimit <= 0) {
      checkScope(caller, done);
      return;
    }
    settle(
      deps.limiter.hit(`token:${caller.tokenId}`, WINDOW_MS),
      (hit) => {
        reply.header('ratelimit-limit', String(deps.rateLimit));
        reply.header('ratelimit-remaining', String(Math.max(0, deps.rateLimit - hit.count)));
        reply.header('ratelimit-reset', seconds(hit.resetInMs));
        if (hit.count > deps.rateLimit) {
          done(
            tooMany(
              hit.resetInMs,
              `this token is limited to ${deps.rateLimit} requests a minute; retry later`,
            ),
          );
        } else checkScope(caller, done);
      },
      done,
    );
  };

  return function authHook(request: FastifyRequest, reply: FastifyReply, done: Done): void {
    const header = request.headers.authorization;
    if (header === undefined || header.trim() === '') {
      refuse(request, MISSING, done);
      return;
    }
    const secret = BEARER.exec(header)?.[1];
    if (secret === undefined) {
      refuse(request, MALFORMED_HEADER, done);
      return;
    }
    settle(deps.verifier.verify(secret, fresh), (caller) => admit(request, reply, caller, done), done);
  };
}

/**
 * For an answer that outlives its request (the event stream): whether the bearer that opened it
 * still works for the same user and scope, asked again through the same verifier, so that a
 * revoked or expired token (a JWT past its `exp`) is refused here as soon as any other request with
 * it would be. A verifier that cannot answer (the store down) leaves the answer as it was.
 */
export function stillAuthorized(
  deps: AuthDeps,
  request: FastifyRequest,
  scope: Scope,
): () => Promise<boolean> {
  const secret = BEARER.exec(request.headers.authorization ?? '')?.[1];
  const user = request.caller?.user;
  return async () => {
    if (secret === undefined || user === undefined) return false;
    let verdict: Verdict;
    try {
      verdict = await deps.verifier.verify(secret, false);
    } catch {
      return true;
    }
    return !isRefusal(verdict) && verdict.user === user && hasScope(verdict, scope);
  };
}
