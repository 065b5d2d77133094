import type { Change } from './change.js';

// Idempotency-Key records.

export interface IdempotencyRef {
  user: string;
  key: string;
}

/** What a finished idempotent create or change produced, enough to replay it. */
export interface IdempotencyOutcome {
  status: number;
  plantId: number | null;
  /** For a change: the plant as its 200 showed it. */
  plant?: { name: string; tag: string | null; version: number };
  /** For a batch create: the ids its 201 showed. */
  ids?: number[];
}

/**
 * Why a key was not claimed: `mismatch` it was used for another request; `in_flight` its request
 * is still under way; `done` its request has finished, with what it produced.
 */
export type IdempotencyRefusal = 'mismatch' | 'in_flight' | 'done';

export type IdempotencyClaim =
  | Change<true, 'mismatch' | 'in_flight'>
  | { refused: 'done'; outcome: IdempotencyOutcome };

/** The Idempotency-Key records of a store. */
export interface IdempotencyPort {
  /** Claims an Idempotency-Key for a request whose body hashes to requestHash. */
  claimIdempotencyKey(
    ref: IdempotencyRef,
    requestHash: string,
    opts: { now: Date; staleAfterMs: number; retainMs: number },
  ): Promise<IdempotencyClaim>;
  /** Forgets a claimed key whose request failed unexpectedly, so it can be retried. */
  releaseIdempotencyKey(ref: IdempotencyRef): Promise<void>;
  /** Deletes idempotency records created before the given time; returns how many. */
  purgeIdempotencyKeys(before: Date): Promise<number>;
}
