import swagger from '@fastify/swagger';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import pino, { type DestinationStream } from 'pino';
import type { Config } from './config.js';
import type { DispatcherOptions } from './events/dispatcher.js';
import type { Resolver } from './events/outbound.js';
import { EventService } from './events/service.js';
import type { StreamOptions } from './events/stream.js';
import { WebhookService } from './events/webhooks.js';
import { GardenService } from './gardens/service.js';
import { docsRoutes } from './http/docs.js';
import { clientErrorHandler, frameworkErrorHandler, registerErrorHandling } from './http/errors.js';
import { registerBodyParsers } from './http/json.js';
import { logSerializers } from './http/log-serializers.js';
import { Metrics } from './http/metrics.js';
import { genReqId } from './http/request-id.js';
import { requestLoggerFactory } from './http/request-logger.js';
import { BearerVerifier } from './identity/bearer.js';
import { JwtVerifier } from './identity/jwt.js';
import { LastUsed } from './identity/last-used.js';
import { TokenService } from './identity/token-service.js';
import { TokenVerifier } from './identity/token-verifier.js';
import { HealthService } from './ops/health.js';
import { PlantService } from './plants/service.js';
import { MemoryRateLimiter, type RateLimiter } from './ratelimit/limiter.js';
import { RedisRateLimiter } from './ratelimit/redis.js';
import { consoleRoutes } from './routes/console.js';
import { eventRoutes } from './routes/events.js';
import { gardenRoutes } from './routes/gardens.js';
import { meRoutes } from './routes/me.js';
import { opsRoutes } from './routes/ops.js';
import { BODY_LIMIT, plantRoutes } from './routes/plants.js';
import { protectedResourceRoutes, resourceMetadataUrl } from './routes/protected-resource.js';
import { tokenRoutes } from './routes/tokens.js';
import { webhookRoutes } from './routes/webhooks.js';
import { Runtime } from './runtime.js';
import { documentRoute } from './schemas/document.js';
import { ErrorBody } from './schemas/error.js';
import { EventSchema, WEBHOOKS_DOC } from './schemas/webhook.js';
import type { Store } from './store/store.js';

export interface AppDeps {
  /** A store to use instead of opening config.database; the caller closes it. */
  store?: Store;
  limiter?: RateLimiter;
  /** Where JSON logs go (default stdout). */
  logStream?: DestinationStream;
  /** How long a verified token is trusted before the store is asked again (default 2 s). */
  tokenCacheMs?: number;
  /** How long token uses gather before lastUsedAt is written (default 1 s). */
  lastUsedFlushMs?: number;
  /** The clock JWTs are checked against (default Date.now). */
  clock?: () => number;
  /** Resolves webhook host names (tests map names to addresses of their own). */
  resolver?: Resolver;
  /** Webhook dispatcher settings beyond the configuration (tests: poll interval, jitter). */
  dispatcher?: Partial<
    Pick<DispatcherOptions, 'pollMs' | 'jitter' | 'concurrency' | 'perEndpoint' | 'clock'>
  >;
  /** Live stream settings (tests: heartbeat, buffer bound). */
  streams?: StreamOptions;
}

const VERSION = '1.0.0';

/** The one Fastify instance used by `serve` and by the tests. */
export async function buildApp(config: Config, deps: AppDeps = {}): Promise<FastifyInstance> {
  const logger = pino(
    {
      level: config.logLevel,
      serializers: logSerializers,
      // Tokens never reach the logs, even if a serializer someday includes headers.
      redact: {
        paths: ['req.headers.authorization', 'req.headers.cookie', '*.authorization'],
        censor: '[redacted]',
      },
    },
    deps.logStream,
  );
  const app: FastifyInstance = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    genReqId,
    childLoggerFactory: requestLoggerFactory,
    logController: new LogController({ requestIdLogLabel: 'requestId' }),
    bodyLimit: BODY_LIMIT,
    trustProxy: config.trustProxy,
    routerOptions: { maxParamLength: 2048 },
    // Slow clients cannot hold a connection forever: Node checks these every checking interval.
    http: {
      headersTimeout: config.headersTimeout,
      requestTimeout: config.requestTimeout,
      connectionsCheckingInterval: Math.min(1_000, Math.ceil(config.headersTimeout / 4)),
    },
    keepAliveTimeout: config.keepAliveTimeout,
    requestTimeout: config.requestTimeout,
    connectionTimeout: Math.max(60_000, config.requestTimeout),
    clientErrorHandler,
    frameworkErrors: frameworkErrorHandler,
    forceCloseConnections: 'idle',
    ajv: {
      customOptions: { coerceTypes: false, removeAdditional: false, allErrors: true, useDefaults: false },
    },
  });

  const warn = (obj: object, msg: string) => app.log.warn(obj, msg);
  const metrics = config.metrics ? new Metrics() : null;
  const runtime = await Runtime.open(config, 'serve', {
    ...(deps.store ? { store: deps.store } : {}),
    ...(metrics
      ? {
          instrument: (raw: Store) => {
            metrics.watchPool(raw);
            return metrics.instrument(raw);
          },
        }
      : {}),
    warn,
    dispatcher: {
      ...(deps.resolver ? { resolver: deps.resolver } : {}),
      ...(metrics ? { onAttempt: metrics.deliveryAttempted } : {}),
      ...deps.dispatcher,
    },
  });
  const { store } = runtime;
  const limiter =
    deps.limiter ?? (config.redisUrl ? new RedisRateLimiter(config.redisUrl) : new MemoryRateLimiter());
  const jwt = config.jwtIssuer
    ? new JwtVerifier({
        issuer: config.jwtIssuer,
        audience: config.jwtAudience,
        ...(config.jwtJwksUrl ? { jwksUrl: config.jwtJwksUrl } : {}),
        algorithms: config.jwtAlgorithms,
        userClaim: config.jwtUserClaim,
        clockToleranceMs: config.jwtClockTolerance,
        allowUntyped: config.jwtAllowUntyped,
        ...(deps.clock ? { clock: deps.clock } : {}),
        ...(metrics ? { observeKeyFetch: metrics.keyFetched } : {}),
        warn: (message) => app.log.warn(message),
      })
    : null;
  const lastUsed = new LastUsed(store, {
    warn,
    ...(deps.lastUsedFlushMs ? { flushMs: deps.lastUsedFlushMs } : {}),
  });
  const builtin = new TokenVerifier(store, deps.tokenCacheMs ?? 2000, undefined, lastUsed);
  const verifier = new BearerVerifier(builtin, jwt);
  const tokens = new TokenService(store, {
    audit: (entry) => {
      metrics?.tokenChanged(entry.action);
      app.log.info({ audit: entry }, `token ${entry.action}`);
    },
    revoked: (id) => builtin.forget(id),
  });
  const gardens = new GardenService(store);
  const events = new EventService(store, gardens, {
    warn,
    maxPerUser: config.maxStreamsPerUser,
    ...deps.streams,
  });
  metrics?.watchStreams(() => events.openCount);
  const service = new PlantService(store, gardens, undefined, () => events.nudge());
  const webhooks = new WebhookService(store, {
    allowPrivate: config.webhookAllowPrivate,
    ...(deps.resolver ? { resolver: deps.resolver } : {}),
  });

  if (config.webhookDelivery) runtime.deliver();
  runtime.purge();

  // Streams would hold the server open: end them before it closes (SIGTERM closes them cleanly).
  app.addHook('preClose', (done) => {
    events.closeAll();
    done();
  });
  app.addHook('onClose', async () => {
    await lastUsed.flush();
    if (!deps.limiter) await limiter.close();
    await runtime.close();
  });
  // Callback-style (not async): this runs on every request, and a promise per hook adds up.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  app.decorateRequest('caller', null);
  registerErrorHandling(app);
  registerBodyParsers(app);
  metrics?.observe(app);

  app.addSchema(ErrorBody);
  app.addSchema(EventSchema);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'plantstore',
        version: VERSION,
        description: 'A store of plants: create, list, read and delete, each with a bearer token.',
        license: { name: 'MIT', identifier: 'MIT' },
        contact: { name: 'plantstore maintainers' },
      },
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description:
              'A built-in token: `pst_` and 43 base64url characters, from `plantstore token create`.',
          },
          ...(jwt
            ? {
                jwtAuth: {
                  type: 'http',
                  scheme: 'bearer',
                  bearerFormat: 'JWT',
                  description: `A JWT access token (RFC 9068) from ${config.jwtIssuer} for the audience ${config.jwtAudience}; scopes in \`scope\` or \`scp\`.`,
                },
              }
            : {}),
        },
      },
      tags: [
        { name: 'plants', description: 'The plant API' },
        {
          name: 'gardens',
          description: 'Gardens and their members: plants shared with viewers, editors and owners',
        },
        {
          name: 'webhooks',
          description: 'Webhook endpoints: signed deliveries (Standard Webhooks) of plant events',
        },
        { name: 'events', description: 'The live stream of plant events (Server-Sent Events)' },
        {
          name: 'identity',
          description: 'Who the caller is, and built-in tokens made and revoked over HTTP',
        },
        { name: 'operations', description: 'Health, readiness, metrics and this description; no token' },
      ],
    },
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => String(json.$id ?? `def-${i}`) },
    transform: documentRoute,
    // OpenAPI 3.1's `webhooks`: what a registered endpoint receives, for generators and /docs.
    transformObject: (doc) =>
      ({
        ...('openapiObject' in doc ? doc.openapiObject : doc.swaggerObject),
        webhooks: WEBHOOKS_DOC,
      }) as never,
  });
  // /docs as a self-hosted service's page: it reads this service's own /openapi.json (with
  // `servers`, so its examples work when pasted), sends nothing off the machine (no agent, MCP,
  // telemetry, request proxy or registry) and offers nothing that would (no toolbar with deploy
  // and share, no developer tools, no button to Scalar's hosted client).
  docsRoutes(app, {
    url: '/openapi.json',
    pageTitle: 'plantstore API reference',
    title: 'plantstore API reference',
    favicon: '/favicon.svg',
    authentication: { preferredSecurityScheme: 'bearerAuth' },
    hideClientButton: true,
    withDefaultFonts: false,
    agent: { disabled: true },
    mcp: { disabled: true },
    telemetry: false,
    showDeveloperTools: 'never',
    showToolbar: 'never',
    externalUrls: { dashboardUrl: '', registryUrl: '', proxyUrl: '', apiBaseUrl: '' },
  });

  const auth = {
    verifier,
    limiter,
    rateLimit: config.rateLimit,
    authFailureLimit: config.authFailureLimit,
    resourceMetadata: jwt ? resourceMetadataUrl : null,
    onRefusal: metrics?.authRefused ?? null,
    security: (jwt ? [{ bearerAuth: [] }, { jwtAuth: [] }] : [{ bearerAuth: [] }]) as Record<
      string,
      string[]
    >[],
  };
  await app.register(plantRoutes(service, auth));
  await app.register(gardenRoutes(gardens, auth));
  await app.register(meRoutes(auth));
  await app.register(tokenRoutes(tokens, auth));
  await app.register(webhookRoutes(webhooks, auth));
  await app.register(eventRoutes(events, auth));
  if (jwt) await app.register(protectedResourceRoutes(config.jwtIssuer));
  await app.register(opsRoutes(new HealthService(store), metrics));
  if (config.console) {
    await app.register(
      consoleRoutes({
        oidc:
          config.jwtIssuer && config.consoleClientId
            ? {
                issuer: config.jwtIssuer,
                clientId: config.consoleClientId,
                scope: config.consoleScope,
                audience: config.jwtAudience,
              }
            : null,
      }),
    );
  }
  return app;
}
