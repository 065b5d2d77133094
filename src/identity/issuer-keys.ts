import { createLocalJWKSet, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';

export type KeyFetchOutcome = 'ok' | 'error';

export interface IssuerKeysOptions {
  issuer: string;
  /** Where the keys are; when absent, discovered from the issuer's metadata. */
  jwksUrl?: string;
  /** Longest wait for one fetch of the key set, discovery included. */
  timeoutMs?: number;
  /** Fewest milliseconds between two fetches caused by an unknown `kid` (CONTRACT.md 3.1: 30 s). */
  minRefetchMs?: number;
  /** A key set older than this is refreshed in the background, so dropped keys do not live forever. */
  maxAgeMs?: number;
  clock?: () => number;
  fetch?: typeof fetch;
  /** Told of every fetch of the key set, for metrics. */
  observe?: (outcome: KeyFetchOutcome) => void;
  /** Told why a fetch failed, for the log. */
  warn?: (message: string) => void;
}

/** No key set was ever fetched and the issuer cannot be reached now. */
export class IssuerUnavailable extends Error {}

const MAX_DOCUMENT_BYTES = 512 * 1024;

// A loop, not /\/+$/: that expression takes time quadratic in a long run of slashes.
function withoutTrailingSlashes(url: string): string {
  let end = url.length;
  while (end > 0 && url[end - 1] === '/') end--;
  return url.slice(0, end);
}

/**
 * An issuer's JSON Web Key Set, fetched on first need and kept. jose's remote key set refetches
 * inline once its cache is stale and fails while the issuer is down; this one keeps the last good
 * set whenever a refresh fails, refetches for an unknown `kid` at most once per `minRefetchMs`,
 * shares one fetch among concurrent requests, and bounds every exchange with `timeoutMs`.
 * jose does the JWK parsing and the choice of key by `kid`, `alg` and key type.
 */
export class IssuerKeys {
  private keys: JWTVerifyGetKey | null = null;
  private kids = new Set<string>();
  private fetchedAt = 0;
  /** When a fetch was last made for an unknown `kid` or a stale set (the first fetch does not count). */
  private lastRefetch = Number.NEGATIVE_INFINITY;
  private inflight: Promise<void> | null = null;
  private discovered: string | null = null;
  private readonly timeoutMs: number;
  private readonly minRefetchMs: number;
  private readonly maxAgeMs: number;
  private readonly clock: () => number;
  private readonly fetch: typeof fetch;

  constructor(private readonly opts: IssuerKeysOptions) {
    this.timeoutMs = opts.timeoutMs ?? 5_000;
    this.minRefetchMs = opts.minRefetchMs ?? 30_000;
    this.maxAgeMs = opts.maxAgeMs ?? 600_000;
    this.clock = opts.clock ?? Date.now;
    this.fetch = opts.fetch ?? globalThis.fetch;
  }

  /** The key set to check a token naming `kid` with; throws IssuerUnavailable only when none was ever had. */
  async forKid(kid: string | undefined): Promise<JWTVerifyGetKey> {
    if (!this.keys) {
      await this.refresh();
      return this.keys!;
    }
    const now = this.clock();
    const mayFetch = now - this.lastRefetch >= this.minRefetchMs;
    if (kid !== undefined && !this.kids.has(kid) && mayFetch) {
      this.lastRefetch = now;
      await this.refresh().catch(() => {}); // the last good set stays in use
    } else if (now - this.fetchedAt >= this.maxAgeMs && mayFetch) {
      this.lastRefetch = now;
      this.refresh().catch(() => {});
    }
    return this.keys;
  }

  private refresh(): Promise<void> {
    this.inflight ??= this.load().finally(() => {
      this.inflight = null;
    });
    return this.inflight;
  }

  private async load(): Promise<void> {
    // One deadline for the whole fetch, discovery included: a hung issuer holds no request longer.
    const signal = AbortSignal.timeout(this.timeoutMs);
    try {
      if (!this.opts.jwksUrl && !this.discovered) this.discovered = await this.discover(signal);
      const url = this.opts.jwksUrl || this.discovered!;
      const jwks = (await this.getJson(url, signal)) as JSONWebKeySet;
      const keys = createLocalJWKSet(jwks); // throws on a malformed set: the old one stays
      this.keys = keys;
      this.kids = new Set(jwks.keys.flatMap((k) => (typeof k.kid === 'string' ? [k.kid] : [])));
      this.fetchedAt = this.clock();
      this.opts.observe?.('ok');
    } catch (err) {
      this.discovered = null; // the issuer may have moved its keys: discover again next time
      this.opts.observe?.('error');
      const message = `could not fetch the key set of ${this.opts.issuer}: ${(err as Error).message}`;
      this.opts.warn?.(message);
      throw new IssuerUnavailable(message);
    }
  }

  /** The jwks_uri of the issuer's OpenID Provider or OAuth Authorization Server metadata. */
  private async discover(signal: AbortSignal): Promise<string> {
    const issuer = this.opts.issuer;
    const base = withoutTrailingSlashes(issuer);
    const candidates = [
      `${base}/.well-known/openid-configuration`,
      `${base}/.well-known/oauth-authorization-server`,
    ];
    // RFC 8414 puts the well-known part before an issuer's path: https://host/.well-known/…/path.
    const u = new URL(issuer);
    if (u.pathname !== '/' && u.pathname !== '') {
      candidates.push(
        `${u.origin}/.well-known/oauth-authorization-server${withoutTrailingSlashes(u.pathname)}`,
      );
    }
    const failures: string[] = [];
    for (const url of candidates) {
      try {
        const meta = (await this.getJson(url, signal)) as { issuer?: unknown; jwks_uri?: unknown };
        // OpenID Connect Discovery 1.0, 4.3: the metadata must name the very issuer it was asked for.
        if (meta.issuer !== issuer) throw new Error(`it names issuer ${JSON.stringify(meta.issuer)}`);
        if (typeof meta.jwks_uri !== 'string' || !/^https?:\/\//.test(meta.jwks_uri)) {
          throw new Error('it has no http(s) jwks_uri');
        }
        return meta.jwks_uri;
      } catch (err) {
        failures.push(`${url}: ${(err as Error).message}`);
        if (signal.aborted) break;
      }
    }
    throw new Error(`no usable metadata (${failures.join('; ')})`);
  }

  private async getJson(url: string, signal: AbortSignal): Promise<unknown> {
    const res = await this.fetch(url, { headers: { accept: 'application/json' }, signal });
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new Error(`HTTP ${res.status}`);
    }
    const declared = Number(res.headers.get('content-length') ?? 0);
    if (declared > MAX_DOCUMENT_BYTES) {
      await res.body?.cancel();
      throw new Error(`document of ${declared} bytes is too large`);
    }
    const text = await res.text();
    if (text.length > MAX_DOCUMENT_BYTES) throw new Error('document is too large');
    return JSON.parse(text);
  }
}
