import type { FastifyInstance } from 'fastify';

/** Attribute values a span carries: never a token, a query value, a plant's name or a body. */
export type SpanAttributes = Record<string, string | number | boolean>;

export interface SpanOptions {
  /** 'client' for the store's work and webhook deliveries (the default), 'internal' for jobs. */
  kind?: 'client' | 'internal';
  /**
   * The parent, as a W3C traceparent (a delivery's: the request that wrote the event); null starts
   * a new trace. Unset: the span active now.
   */
  parent?: string | null;
}

/** What the OpenTelemetry SDK does for this process once traces are on (./otel.ts). */
export interface Tracing {
  /** Runs fn inside a new span, ended when what fn returns settles (an error sets its status). */
  span<T>(name: string, attributes: SpanAttributes, fn: () => T, opts?: SpanOptions): T;
  /**
   * The store's work (contract 14.1): fn as a client span under the active span, ended when what fn
   * returns settles; fn alone when no span is active (background polls are not traces of their
   * own). `leaf`: nothing fn does is traced under it, so fn runs in the caller's context, which
   * spares a context switch a call.
   */
  childSpan<T>(name: string, attributes: SpanAttributes, fn: () => T, leaf: boolean): T;
  /** The active span as a W3C traceparent (null: none), for an event row to carry. */
  traceparent(): string | null;
  /** The headers that carry the active span to another service (traceparent, tracestate). */
  headers(): Record<string, string>;
  /** trace_id and span_id of the active span, for every log line (pino's mixin). */
  logFields(): Record<string, string>;
  /**
   * One server span per request (its first onRequest hook, continuing an incoming traceparent),
   * ended by an onResponse hook with the status: the app's other hooks, its handler and the store's
   * work run inside it.
   */
  instrument(app: FastifyInstance): void;
  /** Sends what is buffered and stops. */
  shutdown(): Promise<void>;
}

let active: Tracing | null = null;

/**
 * Whether the standard OTEL_* variables turn traces on (contract 14.1): OTEL_TRACES_EXPORTER=otlp,
 * or an OTLP endpoint set, unless OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
 */
export function tracesWanted(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((e) => e.trim().toLowerCase())
    .filter((e) => e !== '');
  if (exporters.includes('none')) return false;
  if (exporters.includes('otlp')) return true;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/**
 * Starts tracing for this process if the variables ask for it (once; later calls return the
 * same). Off, nothing of OpenTelemetry is loaded: the SDK comes in by dynamic import only here.
 */
export async function startTracing(env: NodeJS.ProcessEnv = process.env): Promise<Tracing | null> {
  if (active || !tracesWanted(env)) return active;
  const { openTracing } = await import('./otel.js');
  active ??= openTracing(env);
  return active;
}

/** This process's tracing, or null when off. */
export const tracing = (): Tracing | null => active;

/** fn inside a span when traces are on; fn alone (nothing else) when off. */
export function inSpan<T>(name: string, attributes: SpanAttributes, fn: () => T, opts?: SpanOptions): T {
  return active ? active.span(name, attributes, fn, opts) : fn();
}

/** The active span as a traceparent for an event row; null when off or outside a span. */
export const currentTraceparent = (): string | null => (active ? active.traceparent() : null);

/**
 * A command's whole run as one span of its own (export, import, backup): tracing started for it
 * when the variables ask, and what is buffered sent before the command returns.
 */
export async function commandSpan<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const traces = await startTracing();
  if (!traces) return fn();
  try {
    return await traces.span(name, { 'plantstore.command': name }, fn, { kind: 'internal', parent: null });
  } finally {
    await traces.shutdown();
  }
}
