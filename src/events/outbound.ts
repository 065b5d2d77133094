import { lookup } from 'node:dns/promises';
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { BlockList, isIP } from 'node:net';

/**
 * The one place that opens connections to URLs users gave (webhooks), as Svix keeps its
 * webhook_http_client: it resolves the name, checks every address, connects only to the address
 * it checked (no second lookup, so DNS cannot be re-pointed in between), follows no redirect, and
 * bounds the whole exchange with one deadline.
 */

export type Resolver = (hostname: string) => Promise<{ address: string; family: 4 | 6 }[]>;

const systemResolver: Resolver = async (hostname) =>
  (await lookup(hostname, { all: true, verbatim: true })).map((a) => ({
    address: a.address,
    family: a.family === 6 ? 6 : 4,
  }));

// Everything that is not the public internet (OWASP SSRF guidance; IANA special-purpose registries).
const forbidden = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  forbidden.addSubnet(net, bits, 'ipv4');
}
// IPv6 outside 2000::/3 (global unicast) is refused whole: that takes in the unspecified and
// loopback addresses, IPv4-compatible (::/96) and IPv4-translated (::ffff:0:0:0/96) addresses,
// NAT64 (64:ff9b::/96, 64:ff9b:1::/48, which reach an IPv4 address of any kind), discard, unique
// local, link-local, site-local, multicast and SRv6. IPv4-mapped addresses (::ffff:0:0/96) are
// judged by the IPv4 address inside. Within 2000::/3, these special ranges:
const forbidden6 = new BlockList();
for (const [net, bits] of [
  ['2001::', 23], // IETF protocol assignments: Teredo, benchmarking, ORCHID …
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4: embeds an IPv4 address of any kind
  ['3fff::', 20], // documentation
] as const) {
  forbidden6.addSubnet(net, bits, 'ipv6');
}

/** The 16 bytes of a valid IPv6 address (zone id dropped); null when it is not one. */
function ipv6Bytes(ip: string): Uint8Array | null {
  // No regular expressions here: string operations run in linear time whatever the input.
  const zone = ip.indexOf('%');
  const bare = zone < 0 ? ip : ip.slice(0, zone);
  if (isIP(bare) !== 6) return null;
  let text = bare;
  // A valid address may end in a dotted IPv4 address (::ffff:1.2.3.4): two groups of 16 bits.
  const last = text.lastIndexOf(':') + 1;
  if (text.includes('.', last)) {
    const [a, b, c, d] = text.slice(last).split('.').map(Number) as [number, number, number, number];
    text = `${text.slice(0, last)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups =
    tail === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill('0'), ...right];
  if (groups.length !== 8) return null;
  const bytes = new Uint8Array(16);
  groups.forEach((g, i) => {
    const n = Number.parseInt(g, 16);
    bytes[2 * i] = n >> 8;
    bytes[2 * i + 1] = n & 255;
  });
  return bytes;
}

/** True for any address that is not plainly on the public internet; also for anything that is not an IP. */
export function isForbiddenAddress(ip: string): boolean {
  const bare = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  if (isIP(bare) === 4) return forbidden.check(bare, 'ipv4');
  const b = ipv6Bytes(bare);
  if (b === null) return true;
  // IPv4-mapped (::ffff:a.b.c.d): the IPv4 address is what would be reached.
  if (b.subarray(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff)
    return forbidden.check(`${b[12]}.${b[13]}.${b[14]}.${b[15]}`, 'ipv4');
  if ((b[0]! & 0xe0) !== 0x20) return true;
  const groups = Array.from({ length: 8 }, (_, i) => ((b[2 * i]! << 8) | b[2 * i + 1]!).toString(16));
  return forbidden6.check(groups.join(':'), 'ipv6');
}

// Said with every refusal of an internal address: how to test with a receiver on this machine.
const LOCAL_TESTING =
  'for local testing, start the service with --webhook-allow-private (WEBHOOK_ALLOW_PRIVATE=true)';

export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string };

/** The syntactic check at creation (and before every delivery): what can be known without DNS. */
export function checkWebhookUrl(raw: string, opts: { allowPrivate: boolean }): UrlCheck {
  if (raw.length > 2000) return { ok: false, reason: 'the URL is longer than 2,000 characters' };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'not an absolute URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { ok: false, reason: 'the scheme must be http or https' };
  if (url.username || url.password) return { ok: false, reason: 'credentials in the URL are not allowed' };
  if (!url.hostname) return { ok: false, reason: 'the URL has no host' };
  if (opts.allowPrivate) return { ok: true, url };
  const host = url.hostname.toLowerCase();
  const bare = host.startsWith('[') ? host.slice(1, -1) : host;
  if (isIP(bare) !== 0) {
    return isForbiddenAddress(bare)
      ? {
          ok: false,
          reason: `the URL names a private, loopback or otherwise internal address (${bare}); ${LOCAL_TESTING}`,
        }
      : { ok: true, url };
  }
  if (host === 'localhost' || host.endsWith('.localhost') || host === 'localhost.') {
    return { ok: false, reason: `the URL names localhost; ${LOCAL_TESTING}` };
  }
  return { ok: true, url };
}

/** How long a host name may take to resolve when an endpoint is made. */
export const CREATE_RESOLVE_MS = 5_000;

const INTERNAL = `the host name resolves to a private, loopback or otherwise internal address; ${LOCAL_TESTING}`;

/**
 * The check at creation: the syntactic one, then (unless private addresses are allowed) the host
 * name resolved, within `timeoutMs`, and every address it has checked. A refusal never says which
 * address a name resolved to: the answer must not become a way to look up internal names.
 */
export async function checkWebhookTarget(
  raw: string,
  opts: { allowPrivate: boolean; resolver?: Resolver; timeoutMs?: number },
): Promise<UrlCheck> {
  const checked = checkWebhookUrl(raw, opts);
  if (!checked.ok || opts.allowPrivate) return checked;
  const host = checked.url.hostname;
  if (host.startsWith('[') || isIP(host) !== 0) return checked;
  let timer: NodeJS.Timeout | undefined;
  try {
    const resolved = await Promise.race([
      (opts.resolver ?? systemResolver)(host),
      new Promise<null>((resolve) => {
        timer = setTimeout(() => resolve(null), opts.timeoutMs ?? CREATE_RESOLVE_MS);
      }),
    ]);
    if (resolved === null)
      return { ok: false, reason: `the host name ${host} did not resolve in time; try again later` };
    if (resolved.length === 0) return { ok: false, reason: `the host name ${host} does not resolve` };
    if (resolved.some((a) => isForbiddenAddress(a.address))) return { ok: false, reason: INTERNAL };
    return checked;
  } catch {
    return { ok: false, reason: `the host name ${host} does not resolve` };
  } finally {
    clearTimeout(timer);
  }
}

export type PostResult =
  | { kind: 'response'; status: number; retryAfterMs: number | null; durationMs: number; address: string }
  | { kind: 'refused'; reason: string }
  | { kind: 'failed'; reason: string; durationMs: number };

/**
 * Kept-alive connections to receivers, one pool (an `http.Agent`) per scheme, checked address,
 * port and host name: a socket is only ever reused for a request to the very address that was
 * checked for it, under the same name (TLS checks the certificate against that name). Every
 * request still resolves and checks first; the pool only saves the connect (and TLS handshake).
 */
export class ConnectionPool {
  private readonly agents = new Map<string, HttpAgent>();

  constructor(
    private readonly opts: {
      /** Pools kept at most; the least recently used is closed beyond. */
      maxPools?: number;
      /** An idle socket is closed after this long. */
      idleMs?: number;
      /** Idle sockets kept per pool (as many as the deliveries one process sends at once, by default). */
      maxFreePerPool?: number;
    } = {},
  ) {}

  /** The agent for requests to `address` (checked) for `hostname`; made on first use. */
  agentFor(protocol: 'http:' | 'https:', address: string, port: string, hostname: string): HttpAgent {
    const key = `${protocol}//${address}|${port}|${hostname}`;
    let agent = this.agents.get(key);
    if (agent) {
      // Most recently used last: the oldest pool is the one let go when there are too many.
      this.agents.delete(key);
      this.agents.set(key, agent);
      return agent;
    }
    const options = {
      keepAlive: true,
      // An idle socket closes after this (before most servers' own keep-alive timeout of 5 s).
      timeout: this.opts.idleMs ?? 4_000,
      maxFreeSockets: this.opts.maxFreePerPool ?? 32,
      scheduling: 'lifo' as const,
    };
    agent = protocol === 'https:' ? new HttpsAgent(options) : new HttpAgent(options);
    this.agents.set(key, agent);
    if (this.agents.size > (this.opts.maxPools ?? 1_000)) {
      const [oldest, pool] = this.agents.entries().next().value!;
      this.agents.delete(oldest);
      pool.destroy();
    }
    return agent;
  }

  /** How many pools there are (one per scheme, address, port and name used). */
  get size(): number {
    return this.agents.size;
  }

  /** Closes every kept-alive socket; later requests open new ones. */
  destroy(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}

export interface PostOptions {
  body: string;
  headers: Record<string, string>;
  timeoutMs: number;
  allowPrivate: boolean;
  resolver?: Resolver;
  /** Read and thrown away; a longer answer is cut off here. */
  maxResponseBytes?: number;
  /** Kept-alive connections to reuse; without, every request opens its own and closes it. */
  pool?: ConnectionPool;
}

/** `Retry-After` as milliseconds: delta-seconds or an HTTP-date; null when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | null {
  if (value === undefined) return null;
  if (/^\s*\d+\s*$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

class Deadline extends Error {}

/** POSTs a webhook delivery to `url`, under the address policy, within `timeoutMs` in all. */
export async function postWebhook(rawUrl: string, opts: PostOptions): Promise<PostResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const checked = checkWebhookUrl(rawUrl, { allowPrivate: opts.allowPrivate });
  if (!checked.ok) return { kind: 'refused', reason: checked.reason };
  const url = checked.url;
  const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;

  let timer: NodeJS.Timeout | undefined;
  let onTimeout: () => void = () => {};
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onTimeout();
      reject(new Deadline());
    }, opts.timeoutMs);
  });
  deadline.catch(() => {});
  // The address connected to, once known: failures are reported without it.
  let reached: string | undefined;
  try {
    let address: string;
    if (isIP(hostname) !== 0) {
      address = hostname;
    } else {
      const resolved = await Promise.race([(opts.resolver ?? systemResolver)(hostname), deadline]);
      if (resolved.length === 0)
        return { kind: 'failed', reason: `${hostname} has no address`, durationMs: elapsed() };
      if (!opts.allowPrivate) {
        const bad = resolved.find((a) => isForbiddenAddress(a.address));
        if (bad) return { kind: 'refused', reason: INTERNAL };
      }
      address = resolved[0]!.address;
    }
    reached = address;
    const res = await Promise.race([
      send(url, address, hostname, opts, (abort) => (onTimeout = abort)).catch((err: SendError) => {
        // A kept-alive socket the receiver closed as this request went out: once more on a new
        // connection, within the same deadline (the receiver may see the delivery twice, as
        // at-least-once allows).
        if (!err.reused) throw err;
        return send(url, address, hostname, { ...opts, pool: undefined }, (abort) => (onTimeout = abort));
      }),
      deadline,
    ]);
    return {
      kind: 'response',
      status: res.status,
      retryAfterMs: parseRetryAfter(res.retryAfter),
      durationMs: elapsed(),
      address,
    };
  } catch (err) {
    if (err instanceof Deadline)
      return { kind: 'failed', reason: `timeout after ${opts.timeoutMs} ms`, durationMs: elapsed() };
    const e = err as NodeJS.ErrnoException;
    // The log names the host as the URL does, never the address a name resolved to.
    const message =
      reached === undefined || reached === hostname ? e.message : e.message.replaceAll(reached, hostname);
    return { kind: 'failed', reason: e.code ? `${e.code}: ${message}` : message, durationMs: elapsed() };
  } finally {
    clearTimeout(timer);
  }
}

type SendError = Error & { reused?: boolean };

/** One request to the checked address; the answer's body is read (bounded) and thrown away. */
function send(
  url: URL,
  address: string,
  hostname: string,
  opts: PostOptions,
  setAbort: (abort: () => void) => void,
): Promise<{ status: number; retryAfter: string | undefined }> {
  const limit = opts.maxResponseBytes ?? 64 * 1024;
  return new Promise((resolve, reject) => {
    const https = url.protocol === 'https:';
    const request = https ? httpsRequest : httpRequest;
    const port = url.port || (https ? '443' : '80');
    const req = request({
      host: address,
      port,
      path: `${url.pathname}${url.search}`,
      method: 'POST',
      agent: opts.pool ? opts.pool.agentFor(https ? 'https:' : 'http:', address, port, hostname) : false,
      // TLS checks the certificate against the name in the URL, not the address connected to.
      ...(url.protocol === 'https:' && isIP(hostname) === 0 ? { servername: hostname } : {}),
      headers: {
        ...opts.headers,
        host: url.host,
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(opts.body),
        'user-agent': 'plantstore-webhooks/1',
      },
    });
    setAbort(() => req.destroy());
    let answered = false;
    req.on('error', (err: SendError) => {
      if (!answered && req.reusedSocket) err.reused = true;
      reject(err);
    });
    req.on('response', (res: IncomingMessage) => {
      answered = true;
      let seen = 0;
      const done = () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] });
      res.on('data', (chunk: Buffer) => {
        seen += chunk.length;
        if (seen > limit) {
          res.destroy();
          done();
        }
      });
      res.on('end', done);
      res.on('error', () => done());
    });
    req.end(opts.body);
  });
}
