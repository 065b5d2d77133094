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
/** One step of authentication: calls `done` with nothing to go on to the next, or with the error. */
type Step = (request: FastifyRequest, reply: FastifyReply, done: Done) => void;

// Runs `then` on a value that may or may not be a promise: no promise, no microtask.
function settle<T>(value: T | Promise<T>, then: (v: T) => void, failed: Done): void {
  if (value instanceof Promise) value.then(then, failed);
  else then(value);
}

/** The steps as one onRequest hook, run in order until one fails or all have passed. */
function chain(steps: Step[]): onRequestHookHandler {
  return function authHook(request: FastifyRequest, reply: FastifyReply, done: Done): void {
    let i = 0;
    const next: Done = (err) => {
      const step = steps[i++];
      if (err !== undefined || step === undefined) done(err);
      else step(request, reply, next);
    };
    next();
  };
}

/**
 * Who is calling: the bearer token, verified, becomes `request.caller` (401 without one). Each
 * failure counts against the client address; past the limit the answer is 429.
 */
function identify(deps: AuthDeps, fresh: boolean): Step {
  const metadata = deps.resourceMetadata ?? null;
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
  const admit = (request: FastifyRequest, verdict: Verdict, done: Done): void => {
    if (isRefusal(verdict)) refuse(request, verdict, done);
    else {
      request.caller = verdict;
      done();
    }
  };
  return (request, _reply, done) => {
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
    settle(deps.verifier.verify(secret, fresh), (verdict) => admit(request, verdict, done), done);
  };
}

/** The caller's per-token rate limit: the RateLimit-* headers on every answer, 429 past it. */
function limit(deps: AuthDeps): Step {
  return (request, reply, done) =>
    settle(
      deps.limiter.hit(`token:${request.caller!.tokenId}`, WINDOW_MS),
      (hit) => {
        reply.header('ratelimit-limit', String(deps.rateLimit));
        reply.header('ratelimit-remaining', String(Math.max(0, deps.rateLimit - hit.count)));
        reply.header('ratelimit-reset', seconds(hit.resetInMs));
        done(
          hit.count > deps.rateLimit
            ? tooMany(
                hit.resetInMs,
                `this token is limited to ${deps.rateLimit} requests a minute; retry later`,
              )
            : undefined,
        );
      },
      done,
    );
}

/** The scope the operation needs: 403 with a challenge naming it when the caller lacks it. */
function requireScope(scope: Scope): Step {
  return (request, _reply, done) =>
    done(
      hasScope(request.caller!, scope)
        ? undefined
        : new AppError(403, 'insufficient_scope', `this operation needs the ${scope} scope`, undefined, {
            'www-authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"`,
          }),
    );
}

/**
 * The onRequest hook of every authenticated route: identify (401), limit (429), requireScope
 * (403). It runs before the body is read, so an unauthenticated body is never parsed.
 * Callback-style: with a cached token and the in-memory limiter, nothing here waits on a promise.
 * A null `scope` admits any valid token. `fresh`: a built-in token is looked up in the store even
 * when it was checked a moment ago.
 */
export function authenticate(
  deps: AuthDeps,
  scope: Scope | null,
  opts: { fresh?: boolean } = {},
): onRequestHookHandler {
  const steps = [identify(deps, opts.fresh === true)];
  if (deps.rateLimit > 0) steps.push(limit(deps));
  if (scope !== null) steps.push(requireScope(scope));
  return chain(steps);
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
