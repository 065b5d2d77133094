import { grantableBy } from '../access/policy.js';
import { ScopeNotHeldError, TokenNotFoundError } from '../errors.js';
import { cursorCodec, type Page, pageOf } from '../paging.js';
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

const isOperator = (m: Maker): m is Operator => m.kind === 'operator';
const mayActForAll = (m: Maker) => isOperator(m) || isAdmin(m);

const byOf = (m: Maker): TokenAudit['by'] =>
  isOperator(m)
    ? { kind: 'operator', account: m.account }
    : m.kind === 'token'
      ? { kind: 'token', user: m.user, tokenId: m.tokenId }
      : { kind: 'jwt', user: m.user };

// A tokens list's cursor names the token its page ended with (the store pages on in the order
// tokens were made) and is bound to the caller and the user filter. Cursors of the form before that
// (`1.<createdAt>.<id>.<hash>`) are still read, by their id.
const TOKEN_POSITION = /^(?:2|1\.(?:0|[1-9][0-9]{0,15}))\.(tok_[A-Za-z0-9_-]{12})$/;
const tokenCursor = cursorCodec<string>({
  write: (id) => `2.${id}`,
  read: (text) => TOKEN_POSITION.exec(text)?.[1],
  another: 'another caller or for another user',
});
const listing = (caller: string, user: string | null) => `tokens\n${caller}\n${user ?? '*'}`;

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
    if (!isOperator(maker)) {
      const held = grantableBy(maker.scopes);
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
  async page(
    maker: Maker,
    q: { user?: string | undefined; cursor?: string | undefined; limit: number },
  ): Promise<Page<TokenRecord>> {
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
    const before = q.cursor === undefined ? null : { id: tokenCursor.decode(q.cursor, listing(who, user)) };
    const rows = await this.store.pageTokens({ user, before, limit: q.limit + 1 });
    return pageOf(rows, q.limit, (last) => tokenCursor.encode(last.id, listing(who, user)));
  }

  /** Every token the maker may see (the command line's list), newest first. */
  async all(maker: Maker, user?: string): Promise<TokenRecord[]> {
    const out: TokenRecord[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.page(maker, { user, cursor, limit: 1000 });
      out.push(...page.items);
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
