import type { Caller } from './caller.js';

/** Which kind of bearer value was refused; `none` when there was no usable bearer value at all. */
export type TokenKind = 'builtin' | 'jwt' | 'none';

/** Why a bearer value was refused: a metrics label, never shown to the caller (who gets one 401). */
export type RefusalReason =
  | 'missing'
  | 'malformed'
  | 'unknown'
  | 'expired'
  | 'revoked'
  | 'disabled'
  | 'algorithm'
  | 'type'
  | 'unknown_key'
  | 'signature'
  | 'issuer'
  | 'audience'
  | 'not_yet_valid'
  | 'claims';

export interface Refusal {
  readonly refused: RefusalReason;
  readonly kind: TokenKind;
}

/** What verifying a bearer value gives: who is calling, or why not. */
export type Verdict = Caller | Refusal;

export const isRefusal = (v: Verdict): v is Refusal => 'refused' in v;

// One frozen object per (kind, reason): refusing allocates nothing.
const made = new Map<string, Refusal>();
export function refusal(kind: TokenKind, refused: RefusalReason): Refusal {
  const key = `${kind}:${refused}`;
  let r = made.get(key);
  if (!r) {
    r = Object.freeze({ kind, refused });
    made.set(key, r);
  }
  return r;
}
