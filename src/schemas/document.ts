import type { FastifySchema } from 'fastify';
import { ID_TEXT, LIMIT_TEXT, MAX_PLANT_ID } from './plant.js';

/**
 * How the OpenAPI document shows what the service reads as text. A plant id in a path and a
 * page's `limit` arrive as text and are checked by the contract's strict text rules (decimal
 * digits, no sign, no leading zero: `/plants/007` is a 400); the document types them as the
 * integers they are, with their bounds, so that a generated client takes `limit: 20`.
 */
const AS_INTEGER = new Map<string, Record<string, unknown>>([
  [
    ID_TEXT,
    {
      type: 'integer',
      minimum: 1,
      maximum: MAX_PLANT_ID,
      description: 'Plant id, 1 … 2^53−1, in decimal digits with no sign or leading zero.',
      examples: [42],
    },
  ],
  [
    LIMIT_TEXT,
    {
      type: 'integer',
      minimum: 1,
      maximum: 1000,
      default: 100,
      description: 'Page size: 1 … 1000 in decimal digits with no sign or leading zero; default 100.',
      examples: [20],
    },
  ],
]);

type Schema = Record<string, unknown>;

function retype(part: unknown): unknown {
  const props = (part as { properties?: Record<string, Schema> } | undefined)?.properties;
  if (!props) return part;
  const out: Record<string, Schema> = {};
  for (const [name, s] of Object.entries(props)) {
    const as = typeof s.pattern === 'string' ? AS_INTEGER.get(s.pattern) : undefined;
    out[name] = as ?? s;
  }
  return { ...(part as Schema), properties: out };
}

/** @fastify/swagger's per-route transform: the document's view of a route's schema. */
export function documentRoute({ schema, url }: { schema: FastifySchema; url: string }): {
  schema: FastifySchema;
  url: string;
} {
  if (!schema) return { schema, url };
  return {
    schema: { ...schema, params: retype(schema.params), querystring: retype(schema.querystring) },
    url,
  };
}
