import type { FastifyBaseLogger, FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { Config } from '../config.js';
import type { AuthDeps } from '../http/auth.js';
import type { Metrics } from '../http/metrics.js';
import { BearerVerifier } from '../identity/bearer.js';
import { JwtVerifier } from '../identity/jwt.js';
import { LastUsed } from '../identity/last-used.js';
import { TokenService } from '../identity/token-service.js';
import { TokenVerifier } from '../identity/token-verifier.js';
import type { RateLimiter } from '../ratelimit/limiter.js';
import { meRoutes } from '../routes/me.js';
import { protectedResourceRoutes, resourceMetadataUrl } from '../routes/protected-resource.js';
import { tokenRoutes } from '../routes/tokens.js';
import type { Store } from '../store/store.js';
import type { Tag } from './docs.js';

export const IDENTITY_TAGS: Tag[] = [
  { name: 'identity', description: 'Who the caller is, and built-in tokens made and revoked over HTTP' },
];

export interface IdentityOptions {
  store: Store;
  limiter: RateLimiter;
  metrics: Metrics | null;
  log: FastifyBaseLogger;
}

/** Settings tests change (AppDeps carries them). */
export interface IdentityTuning {
  /** The clock JWTs are checked against (default Date.now). */
  clock?: () => number;
  /** How long a verified token is trusted before the store is asked again (default 2 s). */
  tokenCacheMs?: number;
  /** How long token uses gather before lastUsedAt is written (default 1 s). */
  lastUsedFlushMs?: number;
}

export interface Identity {
  /** How every feature's routes know the caller: built-in tokens and, when configured, JWTs. */
  auth: AuthDeps;
  /** /me, /tokens and, with a JWT issuer, the protected-resource metadata. */
  feature: FastifyPluginAsync;
  /** Records a use of a built-in token (its lastUsedAt, to the minute) found valid without a request. */
  tokenUsed: (tokenId: string) => void;
}

/** Who is calling, and the routes where callers see themselves and manage built-in tokens. */
export function identity(config: Config, opts: IdentityOptions, tuning: IdentityTuning = {}): Identity {
  const { store, metrics, log } = opts;
  const jwt = config.jwtIssuer
    ? new JwtVerifier({
        issuer: config.jwtIssuer,
        audience: config.jwtAudience,
        ...(config.jwtJwksUrl ? { jwksUrl: config.jwtJwksUrl } : {}),
        algorithms: config.jwtAlgorithms,
        userClaim: config.jwtUserClaim,
        clockToleranceMs: config.jwtClockTolerance,
        allowUntyped: config.jwtAllowUntyped,
        ...(tuning.clock ? { clock: tuning.clock } : {}),
        ...(metrics ? { observeKeyFetch: metrics.keyFetched } : {}),
        warn: (message) => log.warn(message),
      })
    : null;
  const lastUsed = new LastUsed(store, {
    warn: (obj, msg) => log.warn(obj, msg),
    ...(tuning.lastUsedFlushMs ? { flushMs: tuning.lastUsedFlushMs } : {}),
  });
  const builtin = new TokenVerifier(store, tuning.tokenCacheMs ?? 2000, undefined, lastUsed);
  const tokens = new TokenService(store, {
    audit: (entry) => {
      metrics?.tokenChanged(entry.action);
      log.info({ audit: entry }, `token ${entry.action}`);
    },
    revoked: (id) => builtin.forget(id),
  });
  const auth: AuthDeps = {
    verifier: new BearerVerifier(builtin, jwt),
    limiter: opts.limiter,
    rateLimit: config.rateLimit,
    authFailureLimit: config.authFailureLimit,
    resourceMetadata: jwt ? resourceMetadataUrl : null,
    onRefusal: metrics?.authRefused ?? null,
    security: jwt ? [{ bearerAuth: [] }, { jwtAuth: [] }] : [{ bearerAuth: [] }],
  };
  const feature = async (app: FastifyInstance) => {
    // The uses gathered since the last write are written before the store closes.
    app.addHook('onClose', async () => {
      await lastUsed.flush();
    });
    await app.register(meRoutes(auth));
    await app.register(tokenRoutes(tokens, auth));
    if (config.jwtIssuer) await app.register(protectedResourceRoutes(config.jwtIssuer));
  };
  return { auth, feature, tokenUsed: (id) => lastUsed.use(id, Date.now()) };
}
