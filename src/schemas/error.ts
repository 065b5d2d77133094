import { type Static, Type } from 'typebox';
import type { ErrorCode } from '../errors.js';

export const ErrorBody = Type.Object(
  {
    error: Type.Integer({ description: 'The HTTP status.', examples: [400] }),
    code: Type.String({ description: 'Stable snake_case identifier.', examples: ['invalid_body'] }),
    message: Type.String({ description: 'One readable sentence.', examples: ['name must not be blank'] }),
    details: Type.Optional(
      Type.Array(
        Type.Object({
          field: Type.String({
            description:
              'JSON pointer to the offending field in its part of the request: `/name` in the body, `/limit` in the query, `/id` in the path.',
            examples: ['/name'],
          }),
          message: Type.String({ examples: ['must not be blank'] }),
        }),
      ),
    ),
  },
  { $id: 'Error', title: 'Error' },
);
// The document says only that a code is a string; the type admits only the codes ErrorCode
// declares, so a body written with any other fails the typecheck.
export type ErrorBody = Static<typeof ErrorBody> & { code: ErrorCode };

const ref = Type.Ref('Error');

const DESCRIPTIONS: Record<number, string> = {
  400: 'Malformed request: body (also one that is not UTF-8, a string with a lone surrogate, or a name with no visible character), parameter (also one that is not percent-encoded UTF-8), cursor, Idempotency-Key or Last-Event-ID (`invalid_event_id`).',
  401: 'Missing, malformed, unknown, expired or revoked bearer token.',
  403: 'The token lacks the scope this operation needs (`insufficient_scope`, with a `WWW-Authenticate` challenge), or the caller sees the garden but its role there is too low (`insufficient_role`, no challenge), or a token asked for more than its maker holds (`scope_not_held`, no challenge).',
  404: 'No such plant or garden, or the caller may not see it (the same answer).',
  409: 'The id exists already, or the Idempotency-Key is in flight; for gardens: `home_garden`, `last_owner`, `garden_not_empty`, `too_many_gardens`, `too_many_members`; for webhooks: `too_many_webhooks`.',
  412: '`If-Match` names no current version of the plant (it changed since it was read, or the value is not an ETag exactly as sent, quotes included): nothing was changed.',
  413: 'Request body over 16 KiB.',
  410: "Gone: the event `Last-Event-ID` names is no longer kept (`events_expired`), or the change feed's `since` is older than the events kept (`changes_expired`: sync again without it).",
  415: 'Content-Type is not one this operation takes (application/json), or names a charset other than UTF-8 (JSON is UTF-8).',
  422: 'Idempotency-Key reused with a different body.',
  428: '`If-Match` is required: send the ETag of the plant as read (or `*`).',
  429: 'Rate limited (`rate_limited`), or as many event streams open as a user may have (`too_many_streams`), or as many exports running as the user or the instance may have (`too_many_exports`); see Retry-After.',
  500: 'Unexpected error; the body names the request id.',
  503: 'The store, or the identity provider whose keys check a JWT, is unavailable; or this instance is shutting down (`shutting_down`, with `Connection: close`: another instance answers the retry); see Retry-After.',
};

const header = (description: string, type: 'string' | 'integer' = 'string') => ({ type, description });

/** Sent on every response. */
export const REQUEST_ID = {
  'x-request-id': header('This request’s id (the caller’s own when it sent a valid one); also in the logs.'),
};
/** Sent on every response to an authenticated request while rate limiting is on. */
export const RATE_LIMIT = {
  'ratelimit-limit': header('Requests allowed per window for this caller.', 'integer'),
  'ratelimit-remaining': header('Requests left in the current window.', 'integer'),
  'ratelimit-reset': header('Seconds until the window resets.', 'integer'),
};
/** The headers of every successful answer to an authenticated request. */
export const SUCCESS_HEADERS = { ...REQUEST_ID, ...RATE_LIMIT };

/** A successful answer's response schema: `schema`, described, with `headers` and those of every success. */
export const success = <T extends object>(schema: T, description: string, headers: object = {}) => ({
  ...schema,
  description,
  headers: { ...headers, ...SUCCESS_HEADERS },
});

/** A 201's response schema: as success, with a Location header (described by `location`) first. */
export const created = <T extends object>(
  schema: T,
  description: string,
  location: string,
  headers: object = {},
) => success(schema, description, { location: { type: 'string', description: location }, ...headers });
const RETRY_AFTER = { 'retry-after': header('Seconds to wait before trying again.', 'integer') };

const HEADERS: Record<number, Record<string, unknown>> = {
  401: {
    'www-authenticate': header(
      'The Bearer challenge: `error`, `error_description` and, with JWTs on, `resource_metadata` (RFC 9728).',
    ),
  },
  403: {
    'www-authenticate': header(
      'The Bearer challenge with `error="insufficient_scope"` and the scope needed.',
    ),
  },
  429: RETRY_AFTER,
  503: RETRY_AFTER,
};

/** Response schemas for the given error statuses, each with the contract's error body and headers. */
export function errorResponses(...statuses: number[]): Record<number, unknown> {
  const out: Record<number, unknown> = {};
  for (const s of statuses) {
    out[s] = {
      ...ref,
      description: DESCRIPTIONS[s] ?? 'Error.',
      headers: { ...REQUEST_ID, ...(s === 401 || s === 500 ? {} : RATE_LIMIT), ...HEADERS[s] },
    };
  }
  return out;
}
