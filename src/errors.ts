/**
 * Stable error codes of the contract (section 4): every code an answer can carry, from a route, the
 * error handler or the writer of what Node's HTTP parser refuses (ErrorBody takes no other).
 */
export type ErrorCode =
  | 'invalid_body'
  | 'invalid_json'
  | 'invalid_parameter'
  | 'invalid_cursor'
  | 'invalid_idempotency_key'
  | 'invalid_event_id'
  | 'too_many_streams'
  | 'too_many_exports'
  | 'bad_request'
  | 'malformed_request'
  | 'request_timeout'
  | 'headers_too_large'
  | 'missing_token'
  | 'invalid_token'
  | 'insufficient_scope'
  | 'not_found'
  | 'plant_not_found'
  | 'method_not_allowed'
  | 'plant_exists'
  | 'idempotency_key_in_flight'
  | 'body_too_large'
  | 'unsupported_media_type'
  | 'idempotency_key_reused'
  | 'rate_limited'
  | 'internal_error'
  | 'store_unavailable'
  | 'overloaded'
  | 'shutting_down'
  | 'auth_unavailable'
  | 'invalid_webhook_url'
  | 'events_expired'
  | 'changes_expired'
  | 'not_acceptable'
  | 'id_space_exhausted'
  | 'precondition_required'
  | 'precondition_failed'
  | 'uri_too_long'
  | 'insufficient_role'
  | 'garden_not_found'
  | 'member_not_found'
  | 'home_garden'
  | 'last_owner'
  | 'garden_not_empty'
  | 'too_many_gardens'
  | 'too_many_members'
  | 'too_many_webhooks'
  | 'token_not_found'
  | 'scope_not_held';

export interface ErrorDetail {
  field: string;
  message: string;
}

/** An error that maps one-to-one onto a contract error response. */
export class AppError extends Error {
  readonly headers: Record<string, string>;
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    headers: Record<string, string> = {},
  ) {
    // A client error's stack says nothing useful, and capturing it is the costliest part of a 404.
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
    this.name = 'AppError';
    this.headers = headers;
  }
}

export class NotFoundError extends AppError {
  constructor(message = 'plant not found') {
    super(404, 'plant_not_found', message);
  }
}

export class ConflictError extends AppError {
  constructor(
    code:
      | 'plant_exists'
      | 'idempotency_key_in_flight'
      | 'home_garden'
      | 'last_owner'
      | 'garden_not_empty'
      | 'too_many_gardens'
      | 'too_many_members'
      | 'too_many_webhooks',
    message: string,
  ) {
    super(409, code, message);
  }
}

/** The caller sees the garden, but its role there is too low (no challenge: the token is fine). */
export class InsufficientRoleError extends AppError {
  constructor(needed: 'editor' | 'owner') {
    super(
      403,
      'insufficient_role',
      needed === 'owner'
        ? 'only an owner of this garden may do this'
        : 'only an editor or owner of this garden may change its plants',
    );
  }
}

/** A token that does not exist, or another user's (to anyone but an admin): the same answer. */
export class TokenNotFoundError extends AppError {
  constructor() {
    super(404, 'token_not_found', 'token not found');
  }
}

/** A token may not give what its maker does not hold: scopes, another user, a longer life. */
export class ScopeNotHeldError extends AppError {
  constructor(message: string, field: string, detail: string) {
    super(403, 'scope_not_held', message, [{ field, message: detail }]);
  }
}

/** A garden that does not exist or that the caller is not a member of: the same answer. */
export class GardenNotFoundError extends AppError {
  constructor() {
    super(404, 'garden_not_found', 'garden not found');
  }
}

export class BadRequestError extends AppError {
  constructor(
    code:
      | 'invalid_parameter'
      | 'invalid_cursor'
      | 'invalid_idempotency_key'
      | 'invalid_event_id'
      | 'invalid_body'
      | 'invalid_webhook_url',
    message: string,
    details?: ErrorDetail[],
  ) {
    super(400, code, message, details);
  }
}

/** A conditional request's If-Match names no current version of the plant: nothing changed. */
export class PreconditionFailedError extends AppError {
  constructor(
    message = 'the plant has changed since the ETag in If-Match was read; read it again and reapply the change',
  ) {
    super(412, 'precondition_failed', message);
  }
}

/** The store could not be reached or could not complete the operation; retrying later may work. */
export class StoreUnavailableError extends AppError {
  constructor(
    message = 'the store is unavailable; retry later',
    readonly cause?: unknown,
  ) {
    super(503, 'store_unavailable', message, undefined, { 'retry-after': '1' });
  }
}

/** Every id up to 2^53−1 has been used as a high-water mark; only client-chosen ids remain. */
export class IdSpaceExhaustedError extends AppError {
  constructor() {
    super(409, 'id_space_exhausted', 'no server-assigned id is left; send an unused id in the request');
  }
}
