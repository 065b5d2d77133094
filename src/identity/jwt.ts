import {
  decodeProtectedHeader,
  errors,
  type JWTPayload,
  type JWTVerifyGetKey,
  type JWTVerifyResult,
  jwtVerify,
  type KeyObject,
} from 'jose';
import { AppError } from '../errors.js';
import { isScope, type Scope } from '../schemas/token.js';
import type { Caller } from './caller.js';
import { IssuerKeys, IssuerUnavailable, type KeyFetchOutcome } from './issuer-keys.js';
import { type RefusalReason, refusal, type Verdict } from './refusal.js';
import { isValidUser } from './tokens.js';

export interface JwtOptions {
  issuer: string;
  audience: string;
  jwksUrl?: string;
  algorithms: string[];
  userClaim: string;
  clockToleranceMs: number;
  allowUntyped: boolean;
  clock?: () => number;
  fetch?: typeof fetch;
  observeKeyFetch?: (outcome: KeyFetchOutcome) => void;
  warn?: (message: string) => void;
}

/** Far above any real access token; a bigger bearer value is refused before any parsing. */
const MAX_TOKEN_LENGTH = 16 * 1024;
/** A verified token is remembered this long at most (and never past its `exp`). */
const CACHE_MS = 60_000;
const CACHE_ENTRIES = 10_000;
const RETRY_AFTER_S = '5';

const refuse = (reason: RefusalReason) => refusal('jwt', reason);

/** RFC 9068 access tokens are typed `at+jwt`; jose-style normalisation drops `application/` and case. */
const normalizeTyp = (typ: unknown) =>
  typeof typ === 'string' ? typ.toLowerCase().replace(/^application\//, '') : typ;

function scopesOf(payload: JWTPayload): Set<Scope> {
  const raw = payload.scope ?? payload.scp;
  const list = typeof raw === 'string' ? raw.split(' ') : Array.isArray(raw) ? raw : [];
  return new Set(list.filter((s): s is Scope => typeof s === 'string' && isScope(s)));
}

/** What a failed jose check says about the token, as a metrics reason. */
function reasonOf(err: unknown): RefusalReason {
  if (err instanceof errors.JWTExpired) return err.claim === 'iat' ? 'not_yet_valid' : 'expired';
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.reason === 'missing') return 'claims';
    if (err.claim === 'iss') return 'issuer';
    if (err.claim === 'aud') return 'audience';
    if (err.claim === 'nbf' || err.claim === 'iat') return 'not_yet_valid';
    if (err.claim === 'typ') return 'type';
    return 'claims';
  }
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'signature';
  if (err instanceof errors.JWKSNoMatchingKey) return 'unknown_key';
  if (err instanceof errors.JOSEAlgNotAllowed || err instanceof errors.JOSENotSupported) return 'algorithm';
  return 'malformed';
}

interface Cached {
  caller: Caller;
  until: number;
}

/**
 * Checks JWT access tokens from one external issuer (CONTRACT.md 3.1) with jose. Every check of
 * the contract must hold; any failure is a refusal (a 401), never an exception, except an issuer
 * whose keys were never had, which is a 503.
 */
export class JwtVerifier {
  private readonly keys: IssuerKeys;
  private readonly cache = new Map<string, Cached>();
  private readonly clock: () => number;
  private readonly toleranceS: number;

  constructor(private readonly opts: JwtOptions) {
    this.clock = opts.clock ?? Date.now;
    this.toleranceS = Math.floor(opts.clockToleranceMs / 1000);
    this.keys = new IssuerKeys({
      issuer: opts.issuer,
      ...(opts.jwksUrl ? { jwksUrl: opts.jwksUrl } : {}),
      clock: this.clock,
      ...(opts.fetch ? { fetch: opts.fetch } : {}),
      ...(opts.observeKeyFetch ? { observe: opts.observeKeyFetch } : {}),
      ...(opts.warn ? { warn: opts.warn } : {}),
    });
  }

  /** The caller a JWT names, or why it is refused. A token checked before comes back without a promise. */
  verify(token: string): Verdict | Promise<Verdict> {
    const hit = this.cache.get(token);
    if (hit) {
      if (this.clock() < hit.until) return hit.caller;
      this.cache.delete(token);
    }
    return this.check(token);
  }

  private async check(token: string): Promise<Verdict> {
    if (token.length > MAX_TOKEN_LENGTH) return refuse('malformed');
    let header: ReturnType<typeof decodeProtectedHeader>;
    try {
      header = decodeProtectedHeader(token);
    } catch {
      return refuse('malformed');
    }
    if (typeof header.alg !== 'string' || !this.opts.algorithms.includes(header.alg))
      return refuse('algorithm');
    const typ = normalizeTyp(header.typ);
    if (typ !== 'at+jwt' && !(this.opts.allowUntyped && (typ === undefined || typ === 'jwt'))) {
      return refuse('type');
    }
    if (header.kid !== undefined && typeof header.kid !== 'string') return refuse('malformed');

    let keys: JWTVerifyGetKey;
    try {
      keys = await this.keys.forKid(header.kid);
    } catch (err) {
      if (!(err instanceof IssuerUnavailable)) throw err;
      throw new AppError(
        503,
        'auth_unavailable',
        'the identity provider that issued this token cannot be reached to fetch its keys; retry later',
        undefined,
        { 'retry-after': RETRY_AFTER_S },
      );
    }

    let result: JWTVerifyResult;
    try {
      result = await this.jwtVerify(token, keys);
    } catch (err) {
      return refuse(reasonOf(err));
    }
    const { payload } = result;
    const nowS = this.clock() / 1000;
    // jose checks `iat` only against a maximum age; the contract also refuses one in the future.
    if (typeof payload.iat === 'number' && payload.iat > nowS + this.toleranceS)
      return refuse('not_yet_valid');
    // The user is named by the rule of `--user` and member names (contract 3.1): a name with a
    // space or a control character would make a user that member routes cannot name.
    const user = payload[this.opts.userClaim];
    if (typeof user !== 'string' || !isValidUser(user)) return refuse('claims');

    const caller: Caller = {
      user,
      scopes: scopesOf(payload),
      tokenId: `jwt:${user}`,
      kind: 'jwt',
      expiresAt: new Date((payload.exp as number) * 1000),
    };
    this.remember(token, caller, (payload.exp as number) * 1000 + this.opts.clockToleranceMs);
    return caller;
  }

  private async jwtVerify(token: string, keys: JWTVerifyGetKey): Promise<JWTVerifyResult> {
    const options = {
      issuer: this.opts.issuer,
      audience: this.opts.audience,
      algorithms: this.opts.algorithms,
      clockTolerance: this.toleranceS,
      currentDate: new Date(this.clock()),
      requiredClaims: ['exp'],
    };
    try {
      return await jwtVerify(token, keys, options);
    } catch (err) {
      // A token without `kid` that several keys could have signed: jose hands over each candidate.
      if (!(err instanceof errors.JWKSMultipleMatchingKeys)) throw err;
      const candidates = err as unknown as AsyncIterable<KeyObject>;
      let last: unknown = err;
      for await (const key of candidates) {
        try {
          return await jwtVerify(token, key, options);
        } catch (e) {
          last = e;
          if (!(e instanceof errors.JWSSignatureVerificationFailed)) break;
        }
      }
      throw last;
    }
  }

  private remember(token: string, caller: Caller, expiresAt: number): void {
    if (this.cache.size >= CACHE_ENTRIES) {
      const now = this.clock();
      for (const [k, e] of this.cache) if (e.until <= now) this.cache.delete(k);
      if (this.cache.size >= CACHE_ENTRIES) this.cache.clear();
    }
    this.cache.set(token, { caller, until: Math.min(expiresAt, this.clock() + CACHE_MS) });
  }
}
