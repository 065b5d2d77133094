import { createHash } from 'node:crypto';
import { AppError, ConflictError } from '../errors.js';
import type { IdempotencyClaim, IdempotencyRef, Store } from '../store/store.js';

// Idempotency-Key as every write that takes one answers it (contract 2): the key claimed with a
// hash of the request, a replay of the recorded outcome, 422 for a key reused with another
// request, 409 while the first is in flight. Plant creates, changes and batches use it, and so
// does a restore from the trash.

/** Idempotency keys are kept at least this long (contract: 24 h). */
export const IDEMPOTENCY_RETAIN_MS = 24 * 3_600_000;
/** A claimed key whose request has not finished after this long is taken to be abandoned (a crash). */
export const IDEMPOTENCY_STALE_MS = 60_000;

/** The hash an Idempotency-Key record keeps of its request body. */
export function requestHash(body: unknown): string {
  return createHash('sha256').update(canonical(body)).digest('hex');
}

// Keys sorted recursively: two bodies are "the same JSON value" exactly when these match.
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** The 422 of a key already used with another request. */
export const keyReused = (): AppError =>
  new AppError(
    422,
    'idempotency_key_reused',
    'this Idempotency-Key was already used with a different request',
  );

/** Claims keys and runs writes under them, against one store. */
export class IdempotentWrites {
  constructor(
    private readonly store: Store,
    private readonly now: () => Date,
  ) {}

  /** Claims the key, answering 422 and 409 for a reused or in-flight one; claimed or done are the caller's. */
  async claim(
    ref: IdempotencyRef,
    request: unknown,
  ): Promise<Exclude<IdempotencyClaim, { refused: 'mismatch' | 'in_flight' }>> {
    const claim = await this.store.claimIdempotencyKey(ref, requestHash(request), {
      now: this.now(),
      staleAfterMs: IDEMPOTENCY_STALE_MS,
      retainMs: IDEMPOTENCY_RETAIN_MS,
    });
    if (!('refused' in claim) || claim.refused === 'done') return claim;
    if (claim.refused === 'mismatch') throw keyReused();
    throw new ConflictError(
      'idempotency_key_in_flight',
      'a request with this Idempotency-Key is still in progress; retry later',
    );
  }

  /**
   * A write under a claimed key. A refusal other than `exists` recorded nothing against the key,
   * and a failure may have left it pending: either frees it, so that a retry is judged afresh. An
   * id that exists recorded its 409.
   */
  async underKey<R extends object>(ref: IdempotencyRef, write: () => Promise<R>): Promise<R> {
    try {
      const result = await write();
      if ('refused' in result && result.refused !== 'exists') await this.store.releaseIdempotencyKey(ref);
      return result;
    } catch (err) {
      await this.store.releaseIdempotencyKey(ref).catch(() => {});
      throw err;
    }
  }

  /** Frees a claimed key after a write that was refused or failed. */
  release(ref: IdempotencyRef): Promise<void> {
    return this.store.releaseIdempotencyKey(ref).catch(() => {});
  }
}
