// Loaded only by tracing.ts's startTracing, when the OTEL_* variables turn traces on.
import {
  type Context,
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
import type { FastifyInstance, FastifyRequest } from 'fastify';
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

  /** fn run in `ctx` (null: the caller's), `span` ended when what it returns settles. */
  const runIn = <T>(span: Span, ctx: Context | null, fn: () => T): T => {
    const failed = () => span.setStatus({ code: SpanStatusCode.ERROR });
    let result: T;
    try {
      result = ctx ? context.with(ctx, fn) : fn();
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
  };
  const REQUEST_SPAN = Symbol('request span');
  type Traced = FastifyRequest & { [REQUEST_SPAN]?: Span };

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
      return runIn(span, trace.setSpan(parent, span), fn);
    },
    childSpan<T>(name: string, attributes: SpanAttributes, fn: () => T, leaf: boolean): T {
      const parent = context.active();
      if (trace.getSpan(parent) === undefined) return fn();
      const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, parent);
      return runIn(span, leaf ? null : trace.setSpan(parent, span), fn);
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
    instrument(app: FastifyInstance) {
      // Two hooks a request (and one run only when a caller goes away) rather than @fastify/otel's
      // four a route (onRequest, onSend, onError, onResponse): each hook Fastify runs costs every
      // request.
      app.addHook('onRequest', (request: Traced, _reply, done) => {
        // An incoming traceparent (and tracestate) continued; none: a trace of its own.
        const parent =
          request.headers.traceparent === undefined
            ? ROOT_CONTEXT
            : propagation.extract(ROOT_CONTEXT, request.headers);
        // Named by the route's template; the path without its query (a query value may be a name
        // or a search). Never a header's or a body's value.
        const route = request.routeOptions.url;
        const attributes: SpanAttributes = {
          'http.request.method': request.method,
          'url.path': request.url.split('?', 1)[0]!,
        };
        if (route) attributes['http.route'] = route;
        const span = tracer.startSpan(
          route ? `${request.method} ${route}` : request.method,
          { kind: SpanKind.SERVER, attributes },
          parent,
        );
        request[REQUEST_SPAN] = span;
        context.with(trace.setSpan(parent, span), done);
      });
      const end = (request: Traced, status: number | null) => {
        const span = request[REQUEST_SPAN];
        if (span === undefined) return;
        request[REQUEST_SPAN] = undefined;
        if (status !== null) span.setAttribute('http.response.status_code', status);
        if (status !== null && status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      };
      app.addHook('onResponse', (request: Traced, reply, done) => {
        end(request, reply.statusCode);
        done();
      });
      // A caller that went away before its answer: the span ends there, with no status code.
      app.addHook('onRequestAbort', (request: Traced, done) => {
        end(request, null);
        done();
      });
    },
    async shutdown() {
      await provider.shutdown();
    },
  };
}
