// Loaded only by tracing.ts's startTracing, when the OTEL_* variables turn traces on.
import { FastifyOtelInstrumentation } from '@fastify/otel';
import {
  context,
  isSpanContextValid,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import type { FastifyPluginCallback, FastifyRequest } from 'fastify';
import { VERSION } from '../version.js';
import type { SpanAttributes, SpanOptions, Tracing } from './tracing.js';

const isThenable = (v: unknown): v is PromiseLike<unknown> =>
  typeof (v as PromiseLike<unknown> | null)?.then === 'function';

/**
 * The SDK as the specification's variables configure it: the exporter by
 * OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf, the default, or
 * http/json; each reads its endpoint, headers and timeout variables itself), the batch processor
 * (OTEL_BSP_*), the sampler (OTEL_TRACES_SAMPLER[_ARG]), the propagators (W3C trace context and
 * baggage), and the resource (OTEL_SERVICE_NAME, default plantstore; OTEL_RESOURCE_ATTRIBUTES).
 */
export function openTracing(env: NodeJS.ProcessEnv): Tracing {
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? '').trim();
  const exporter = protocol === 'http/json' ? new JsonExporter() : new ProtoExporter();
  const resource = resourceFromAttributes({ 'service.name': 'plantstore', 'service.version': VERSION }).merge(
    detectResources({ detectors: [envDetector] }),
  );
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] });
  provider.register();
  const tracer = trace.getTracer('plantstore', VERSION);

  return {
    span<T>(name: string, attributes: SpanAttributes, fn: () => T, opts: SpanOptions = {}): T {
      const parent =
        opts.parent === undefined
          ? context.active()
          : opts.parent === null
            ? ROOT_CONTEXT
            : propagation.extract(ROOT_CONTEXT, { traceparent: opts.parent });
      const kind = opts.kind === 'internal' ? SpanKind.INTERNAL : SpanKind.CLIENT;
      const span = tracer.startSpan(name, { kind, attributes }, parent);
      const failed = () => span.setStatus({ code: SpanStatusCode.ERROR });
      let result: T;
      try {
        result = context.with(trace.setSpan(parent, span), fn);
      } catch (err) {
        failed();
        span.end();
        throw err;
      }
      if (!isThenable(result)) {
        span.end();
        return result;
      }
      return (result as PromiseLike<unknown>).then(
        (v) => {
          span.end();
          return v;
        },
        (err: unknown) => {
          failed();
          span.end();
          throw err;
        },
      ) as T;
    },
    traceparent() {
      const c = trace.getSpan(context.active())?.spanContext();
      if (!c || !isSpanContextValid(c)) return null;
      return `00-${c.traceId}-${c.spanId}-0${c.traceFlags & 1}`;
    },
    headers() {
      const carrier: Record<string, string> = {};
      propagation.inject(context.active(), carrier);
      return carrier;
    },
    logFields(): Record<string, string> {
      const c = trace.getSpan(context.active())?.spanContext();
      return c && isSpanContextValid(c) ? { trace_id: c.traceId, span_id: c.spanId } : {};
    },
    fastifyPlugin() {
      const instrumentation = new FastifyOtelInstrumentation({
        // One span per request, not one per hook and handler: the store's spans are its children.
        instrumentHooks: false,
        instrumentHandler: false,
        // An error's message may quote what the caller sent; the status says it failed.
        recordExceptions: false,
        requestHook: (span: Span, request: FastifyRequest) => {
          // The path without its query (a query value may be a name or a search); the route's
          // template names the span.
          const route = request.routeOptions.url;
          span.setAttribute('url.path', request.url.split('?', 1)[0]!);
          span.updateName(route ? `${request.method} ${route}` : request.method);
        },
      });
      return instrumentation.plugin() as unknown as FastifyPluginCallback;
    },
    async shutdown() {
      await provider.shutdown();
    },
  };
}
