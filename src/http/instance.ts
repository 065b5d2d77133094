import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import pino, { type DestinationStream } from 'pino';
import type { Config } from '../config.js';
import { tracing } from '../telemetry/tracing.js';
import { clientErrorHandler, frameworkErrorHandler } from './errors.js';
import { logSerializers } from './log-serializers.js';
import { genReqId } from './request-id.js';
import { requestLoggerFactory } from './request-logger.js';
import { visibleCharacterKeyword } from './validation.js';

/**
 * A Fastify instance as the configuration asks: JSON logs without credentials, request ids, the
 * body limit, and the timeouts that keep slow clients from holding connections.
 */
export function fastifyInstance(
  config: Config,
  bodyLimit: number,
  logStream?: DestinationStream,
): FastifyInstance {
  const traces = tracing();
  const logger = pino(
    {
      level: config.logLevel,
      // Traces on: every line written while a span is active has its trace_id and span_id.
      ...(traces ? { mixin: () => traces.logFields() } : {}),
      serializers: logSerializers,
      // Tokens never reach the logs, even if a serializer someday includes headers.
      redact: {
        paths: ['req.headers.authorization', 'req.headers.cookie', '*.authorization'],
        censor: '[redacted]',
      },
    },
    logStream,
  );
  return Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    genReqId,
    childLoggerFactory: requestLoggerFactory,
    logController: new LogController({ requestIdLogLabel: 'requestId' }),
    bodyLimit,
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
    // Its 503 carries no Retry-After: a request that races the close is answered by the drain
    // (http/drain.ts) instead, with one.
    return503OnClosing: false,
    ajv: {
      customOptions: { coerceTypes: false, removeAdditional: false, allErrors: true, useDefaults: false },
      plugins: [visibleCharacterKeyword],
    },
  });
}
