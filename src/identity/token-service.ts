import { createHash } from 'node:crypto';
import { grantable } from '../access/policy.js';
import { BadRequestError, ScopeNotHeldError, TokenNotFoundError } from '../errors.js';
import { DEFAULT_SCOPES, type Scope } from '../schemas/token.js';
import type { Change, Store, TokenRecord, TokenRefusal } from '../store/store.js';
import { type Caller, isAdmin } from './caller.js';
import { createToken, isTokenId } from './tokens.js';

/** Whether a revocation revoked the token now: false when it was revoked already; never one not found. */
function revokedNow(r: Change<true, TokenRefusal>): boolean {
  if (!('refused' in r)) return true;
  if (r.refused === 'missing') throw new TokenNotFoundError();
  return false;
}

/** Someone with the database's credentials, at `bin/plantstore token …`: may make any token. */
export interface Operator {
  kind: 'operator';
  /** The account that ran the command, for the audit log. */
  account: string;
}

/** Who asks for a token to be made, listed, read or revoked. */
export type Maker = Caller | Operator;

export interface TokenRequest {
  /** Whose token; default the maker's own user (an operator must name one). */
  user?: string | undefined;
  scopes?: Scope[] | undefined;
  /** Lifetime in ms; null or absent: as long as the maker's (forever for an operator). */
  expiresInMs?: number | null | undefined;
  name?: string | null | undefined;
}

/** One line of the audit log: never a secret, only the token's id. */
export interface TokenAudit {
  action: 'created' | 'revoked';
  by: { kind: 'token' | 'jwt'; user: string; tokenId?: string } | { kind: 'operator'; account: string };
  tokenId: string;
  user: string;
  scopes: Scope[];
  expiresAt: string | null;
  /** The HTTP request that did it, to find its other log lines. */
  requestId?: string;
}

export interface TokenServiceOptions {
  /** Every creation and revocation, HTTP or command line. */
  audit: (entry: TokenAudit) => void;
  /** A token this process revoked: forget any cached verdict for it. */
  revoked?: (tokenId: string) => void;
  clock?: () => number;
}

export interface TokenPage {
  tokens: TokenRecord[];
  /** The cursor of the next page; null on the last. */
  next: string | null;
}

const isOperator = (m: Maker): m is Operator => m.kind === 'operator';
const mayActForAll = (m: Maker) => isOperator(m) || isAdmin(m);

const byOf = (m: Maker): TokenAudit['by'] =>
  isOperator(m)
    ? { kind: 'operator', account: m.account }
    : m.kind === 'token'
      ? { kind: 'token', user: m.user, tokenId: m.tokenId }
      : { kind: 'jwt', user: m.user };

// A cursor names the last token seen (its creation time and id) and a short hash of the listing it
// belongs to (the caller and the user filter), so one issued for another listing is refused.
function listingHash(caller: string, user: string | null): string {
  return createHash('sha256')
    .update(`tokens\n${caller}\n${user ?? '*'}`)
    .digest('base64url')
    .slice(0, 16);
}

// A cursor names the token its page ended with; the store pages on in the order tokens were made.
// Cursors of the form before that (`1.<createdAt>.<id>.<hash>`) are still read, by their id.
function encodeCursor(last: TokenRecord, caller: string, user: string | null): string {
  return Buffer.from(`2.${last.id}.${listingHash(caller, user)}`).toString('base64url');
}

function decodeCursor(cursor: string, caller: string, user: string | null) {
  const bad = (why: string) =>
    new BadRequestError('invalid_cursor', `cursor ${why}`, [{ field: '/cursor', message: why }]);
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(cursor)) throw bad('is not a cursor this service issued');
  const m = /^(?:2|1\.(?:0|[1-9][0-9]{0,15}))\.(tok_[A-Za-z0-9_-]{12})\.([A-Za-z0-9_-]{16})$/.exec(
    Buffer.from(cursor, 'base64url').toString('latin1'),
  );
  if (!m) throw bad('is not a cursor this service issued');
  if (m[2] !== listingHash(caller, user)) throw bad('was issued to another caller or for another user');
  return { id: m[1] as string };
}

const callerName = (m: Maker) => (isOperator(m) ? `operator:${m.account}` : m.user);

/**
 * Built-in tokens: made, listed, read and revoked, by HTTP (a caller with `tokens:manage`) and by
 * the command line (an operator) alike. The rules against escalation live here, once:
 * a token never gets a scope, a user or a lifetime its maker does not hold (contract 3.3).
 */
export class TokenService {
  private readonly clock: () => number;

  constructor(
    private readonly store: Store,
    private readonly opts: TokenServiceOptions,
  ) {
    this.clock = opts.clock ?? Date.now;
  }

  /** Makes a token; the secret is in the answer this once and never again. */
  async create(
    maker: Maker,
    req: TokenRequest,
    requestId?: string,
  ): Promise<{ record: TokenRecord; secret: string }> {
    const now = new Date(this.clock());
    const all = mayActForAll(maker);
    const user = req.user ?? (isOperator(maker) ? undefined : maker.user);
    if (user === undefined) throw new Error('an operator must name the user of a token');
    if (!all && user !== (maker as Caller).user) {
      throw new ScopeNotHeldError(
        'only a token with plants:admin makes tokens for other users',
        '/user',
        'another user than the caller needs plants:admin',
      );
    }
    const scopes = [...new Set(req.scopes ?? DEFAULT_SCOPES)];
    if (!all) {
      const held = grantable((maker as Caller).scopes);
      const missing = scopes.filter((s) => !held.includes(s));
      if (missing.length > 0) {
        throw new ScopeNotHeldError(
          `a token may only give scopes its maker holds; this one does not hold ${missing.join(', ')}`,
          '/scopes',
          `not held by the caller: ${missing.join(', ')}`,
        );
      }
    }
    const notAfter = isOperator(maker) ? null : maker.expiresAt;
    // A JWT a few seconds past its exp is still accepted within the clock leeway; a token it made
    // would be born expired.
    if (notAfter !== null && notAfter.getTime() <= now.getTime()) {
      throw new ScopeNotHeldError(
        `the token making this one expired at ${notAfter.toISOString()}; it can make no token`,
        '/expiresIn',
        `must end by ${notAfter.toISOString()}, which has passed`,
      );
    }
    const expiresInMs = req.expiresInMs ?? null;
    if (notAfter !== null && expiresInMs !== null && now.getTime() + expiresInMs > notAfter.getTime()) {
      throw new ScopeNotHeldError(
        `the token making this one expires at ${notAfter.toISOString()}; a token it makes cannot outlive it`,
        '/expiresIn',
        `must end by ${notAfter.toISOString()}`,
      );
    }
    const made = await createToken(
      this.store,
      { user, scopes, name: req.name ?? null, expiresInMs, notAfter },
      now,
    );
    this.opts.audit({
      action: 'created',
      by: byOf(maker),
      tokenId: made.record.id,
      user: made.record.user,
      scopes: made.record.scopes,
      expiresAt: made.record.expiresAt?.toISOString() ?? null,
      ...(requestId === undefined ? {} : { requestId }),
    });
    return made;
  }

  /**
   * A page of the tokens the maker may see, newest first: its own user's, or (an admin, an
   * operator) every user's or `user`'s.
   */
  async page(maker: Maker, q: { user?: string | undefined; cursor?: string | undefined; limit: number }) {
    const all = mayActForAll(maker);
    if (!all && q.user !== undefined && q.user !== (maker as Caller).user) {
      throw new ScopeNotHeldError(
        "only a token with plants:admin lists other users' tokens",
        '/user',
        'another user than the caller needs plants:admin',
      );
    }
    const user = all ? (q.user ?? null) : (maker as Caller).user;
    const who = callerName(maker);
    const before = q.cursor === undefined ? null : decodeCursor(q.cursor, who, user);
    const rows = await this.store.pageTokens({ user, before, limit: q.limit + 1 });
    const tokens = rows.slice(0, q.limit);
    const last = tokens.at(-1);
    const next = rows.length > q.limit && last ? encodeCursor(last, who, user) : null;
    return { tokens, next } satisfies TokenPage;
  }

  /** Every token the maker may see (the command line's list), newest first. */
  async all(maker: Maker, user?: string): Promise<TokenRecord[]> {
    const out: TokenRecord[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.page(maker, { user, cursor, limit: 1000 });
      out.push(...page.tokens);
      cursor = page.next ?? undefined;
    } while (cursor !== undefined);
    return out;
  }

  /** One token the maker may see; another user's is not found (unless the maker is an admin). */
  async get(maker: Maker, id: string): Promise<TokenRecord> {
    const t = isTokenId(id) ? await this.store.findToken(id) : null;
    if (!t || (!mayActForAll(maker) && t.user !== (maker as Caller).user)) throw new TokenNotFoundError();
    return t;
  }

  /** Revokes a token the maker may see; false when it was revoked already (still 204 over HTTP). */
  async revoke(maker: Maker, id: string, requestId?: string): Promise<boolean> {
    const t = await this.get(maker, id);
    const r = await this.store.revokeToken(t.id, new Date(this.clock()));
    this.opts.revoked?.(t.id);
    const revoked = revokedNow(r);
    if (revoked) {
      this.opts.audit({
        action: 'revoked',
        by: byOf(maker),
        tokenId: t.id,
        user: t.user,
        scopes: t.scopes,
        expiresAt: t.expiresAt?.toISOString() ?? null,
        ...(requestId === undefined ? {} : { requestId }),
      });
    }
    return revoked;
  }
}
