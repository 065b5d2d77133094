import type { FastifySchemaValidationError } from 'fastify';
import { AppError, type ErrorDetail } from '../errors.js';
import { MAX_PLANT_ID } from '../schemas/plant.js';

type Context = 'body' | 'querystring' | 'params' | 'headers' | string | undefined;

// Patterns whose failure needs a sentence of its own; text fields are judged by their value.
const PATTERN_MESSAGES: Record<string, string> = {
  limit: 'must be a whole number from 1 to 1000',
  id: `must be a whole number from 1 to ${MAX_PLANT_ID}`,
  'idempotency-key': 'must be 1 to 255 printable ASCII characters',
  include: 'must be a comma-separated list of id, garden and version',
  'last-event-id': 'is not an event id',
};

// The code of a refused header, by the header (every other one the routes validate is Idempotency-Key).
const HEADER_CODES: Record<string, 'invalid_event_id'> = { '/last-event-id': 'invalid_event_id' };

const TYPE_NAMES: Record<string, string> = {
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  object: 'a JSON object',
  array: 'an array',
  boolean: 'true or false',
  null: 'null',
};

function valueAt(root: unknown, pointer: string): unknown {
  let v = root;
  for (const part of pointer.split('/').slice(1)) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[part.replace(/~1/g, '/').replace(/~0/g, '~')];
  }
  return v;
}

function describe(e: FastifySchemaValidationError, value: unknown, name: string, context: Context): string {
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return 'is required';
    case 'additionalProperties':
      return 'is not a known field';
    case 'type':
      if (context === 'querystring' && Array.isArray(value)) return 'must be given only once';
      return `must be ${String(p.type)
        .split(',')
        .map((t) => TYPE_NAMES[t] ?? t)
        .join(' or ')}`;
    case 'minLength':
      return p.limit === 1 ? 'must not be empty' : `must be at least ${p.limit} characters`;
    case 'maxLength':
      return `must be at most ${p.limit} characters`;
    case 'minimum':
    case 'maximum':
      return `must be from 1 to ${MAX_PLANT_ID}`;
    case 'pattern': {
      const fixed = PATTERN_MESSAGES[name];
      if (fixed) return fixed;
      if (typeof value === 'string' && /[\u0000-\u001F\u007F]/.test(value))
        return 'must not contain control characters';
      return 'must not be blank';
    }
    // A union of constants (a member's role): name the values it takes.
    case 'const':
    case 'anyOf':
      if (name === 'role') return 'must be viewer, editor or owner';
      if (name === 'delimiter') return 'must be "," or ";" or a tab (%09)';
      return e.message ?? 'is invalid';
    default:
      return e.message ?? 'is invalid';
  }
}

/** Turns Ajv's errors into the contract's 400 with one readable detail per offending field. */
export function validationError(
  errors: FastifySchemaValidationError[],
  context: Context,
  input: { body: unknown; query: unknown; params: unknown; headers: unknown },
): AppError {
  const inBody = context === 'body';
  const root = inBody
    ? input.body
    : context === 'querystring'
      ? input.query
      : context === 'params'
        ? input.params
        : input.headers;
  const details: ErrorDetail[] = [];
  const seen = new Set<string>();
  for (const e of errors) {
    const p = e.params as Record<string, unknown>;
    const extra =
      e.keyword === 'required'
        ? p.missingProperty
        : e.keyword === 'additionalProperties'
          ? p.additionalProperty
          : undefined;
    const pointer = extra === undefined ? e.instancePath : `${e.instancePath}/${String(extra)}`;
    if (seen.has(pointer)) continue;
    seen.add(pointer);
    const name = pointer.split('/').pop() ?? '';
    const message = describe(e, pointer === '' ? root : valueAt(root, pointer), name, context);
    // One form everywhere: a JSON pointer into the part of the request the field is in
    // (`/name` in the body, `/limit` in the query, `/id` in the path).
    details.push({ field: pointer, message });
  }
  const label = (d: ErrorDetail) => {
    const field = d.field.slice(1);
    if (!inBody) return context === 'querystring' ? `query parameter ${field}` : field;
    return d.field === '' ? 'request body' : field;
  };
  const sentence = (d: ErrorDetail) =>
    !inBody && d.message === 'is not a known field'
      ? `${d.field.slice(1)} is not a known query parameter`
      : `${label(d)} ${d.message}`;
  const message = details.map(sentence).join('; ') || 'the request is invalid';
  const code = inBody
    ? 'invalid_body'
    : context === 'headers'
      ? (HEADER_CODES[details[0]?.field ?? ''] ?? 'invalid_idempotency_key')
      : 'invalid_parameter';
  return new AppError(400, code, message, details.length ? details : undefined);
}
