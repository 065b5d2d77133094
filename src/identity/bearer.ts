import type { JwtVerifier } from './jwt.js';
import { refusal, type Verdict } from './refusal.js';
import type { TokenVerifier } from './token-verifier.js';

const JWT_DISABLED = refusal('jwt', 'disabled');

/** A JWT is three base64url segments; built-in tokens (`pst_…`) never contain a dot. */
function isJwtShaped(bearer: string): boolean {
  const first = bearer.indexOf('.');
  if (first < 0) return false;
  const second = bearer.indexOf('.', first + 1);
  return second > 0 && bearer.indexOf('.', second + 1) < 0;
}

/**
 * "Who is calling": turns any bearer value, built-in token or JWT, into a Caller or a refusal.
 * The HTTP hook asks this and never knows which kind it was.
 */
export class BearerVerifier {
  constructor(
    private readonly builtin: TokenVerifier,
    private readonly jwt: JwtVerifier | null,
  ) {}

  /**
   * Answers at once (no promise) for a token checked recently, unless `fresh` asks the store
   * again. May reject with a 503 AppError.
   */
  verify(bearer: string, fresh = false): Verdict | Promise<Verdict> {
    if (isJwtShaped(bearer)) return this.jwt ? this.jwt.verify(bearer) : JWT_DISABLED;
    return this.builtin.verify(bearer, Date.now(), fresh);
  }
}
