import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { parse as parseConnectionString } from 'pg-connection-string';

// Several PostgreSQL hosts (contract section 6, version 4): libpq's multi-host connection strings,
// `postgres://u@h1:5432,h2:5432/db?target_session_attrs=read-write`, over node-postgres, which takes
// one host only. Each new connection goes to the host that last suited (the first one at start); a
// host that refuses, times out or does not suit target_session_attrs (a standby, or the old primary
// come back read-only) is passed over for the next, so after a failover the pool's new connections
// find the promoted standby by themselves, with no restart.

export type SessionAttrs = 'read-write' | 'primary' | 'any';

export interface PgHost {
  host: string;
  port: number;
}

export interface PgTarget {
  hosts: PgHost[];
  attrs: SessionAttrs;
  /** Everything else the URL says (user, password, database, ssl, …), for every host alike. */
  config: pg.ClientConfig;
}

/** A DATABASE_URL that is not one libpq would take; the message says what is wrong. */
export class PgUrlError extends Error {}

const ATTRS: readonly SessionAttrs[] = ['read-write', 'primary', 'any'];

/**
 * Parses a postgres:// URL as libpq does its multi-host form: a comma-separated list of hosts, each
 * with its own optional port (IPv6 addresses in brackets), and target_session_attrs (read-write,
 * primary or any; read-write by default when several hosts are named, any for one). Query
 * parameters other than target_session_attrs are left to node-postgres, as for one host.
 */
export function parsePgUrl(url: string): PgTarget {
  const m = /^(postgres(?:ql)?:\/\/)([^@/?#]*@)?([^/?#]*)(.*)$/s.exec(url);
  if (!m) throw new PgUrlError('must be postgres://[user[:password]@]host[:port][,host[:port]…]/database');
  const [, scheme, userinfo = '', hostList, rest] = m as unknown as [
    string,
    string,
    string | undefined,
    string,
    string,
  ];
  const query = new URLSearchParams(
    rest.includes('?') ? rest.slice(rest.indexOf('?') + 1).split('#')[0] : '',
  );
  const given = query.get('target_session_attrs');
  const defaultPort = query.get('port');
  const hosts = hostList.split(',').map((h) => parseHost(h, defaultPort));
  if (given !== null && !(ATTRS as string[]).includes(given)) {
    throw new PgUrlError(`target_session_attrs must be ${ATTRS.join(', ')}; got ${JSON.stringify(given)}`);
  }
  query.delete('target_session_attrs');
  const path = rest.split('?')[0]!;
  const q = query.toString();
  // The rest of the URL, with one stand-in host, as node-postgres reads a single-host URL.
  const config = parseConnectionString(
    `${scheme}${userinfo}localhost${path}${q ? `?${q}` : ''}`,
  ) as pg.ClientConfig;
  delete config.host;
  delete config.port;
  return {
    hosts,
    attrs: (given as SessionAttrs | null) ?? (hosts.length > 1 ? 'read-write' : 'any'),
    config,
  };
}

function parseHost(text: string, defaultPort: string | null): PgHost {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]]+))(?::([^:]*))?$/.exec(text);
  if (!m)
    throw new PgUrlError(`${JSON.stringify(text)} is not a host[:port] (an IPv6 address goes in brackets)`);
  const host = decodeURIComponent(m[1] ?? m[2]!);
  const portText = m[3] ?? defaultPort ?? '5432';
  if (!/^\d{1,5}$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535) {
    throw new PgUrlError(`the port of ${JSON.stringify(text)} must be 1-65535`);
  }
  return { host, port: Number(portText) };
}

/** Whether a URL needs the multi-host connector (several hosts, or target_session_attrs given). */
export function isMultiHost(url: string): boolean {
  const authority = /^postgres(?:ql)?:\/\/([^/?#]*)/.exec(url)?.[1] ?? '';
  return (
    authority.slice(authority.lastIndexOf('@') + 1).includes(',') || /[?&]target_session_attrs=/.test(url)
  );
}

/** A host that took the connection but does not suit target_session_attrs. */
export class UnsuitableHost extends Error {
  readonly code = 'PLANTSTORE_UNSUITABLE_HOST';
}

/** Whether a connected client's server suits `attrs`. */
export async function suits(client: pg.ClientBase, attrs: SessionAttrs): Promise<string | null> {
  if (attrs === 'any') return null;
  const { rows } = await client.query<{ standby: boolean; ro: string }>(
    "SELECT pg_is_in_recovery() AS standby, current_setting('transaction_read_only') AS ro",
  );
  const r = rows[0]!;
  if (attrs === 'primary') return r.standby ? 'a standby (in recovery)' : null;
  return r.standby || r.ro === 'on' ? 'read-only' : null;
}

// A connection attempt that failed because of its host: worth trying the next one.
const HOST_ERROR = /^(08|57P0[1-3]|53300)/;
const NET_ERRORS = [
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
];
export function isHostFailure(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string')
    return HOST_ERROR.test(code) || NET_ERRORS.includes(code) || err instanceof UnsuitableHost;
  return err instanceof Error && /timeout|terminated|Connection/i.test(err.message);
}

/**
 * Which host new connections go to: the one that last suited, moved on to the next in the list when
 * it fails. Shared by a pool and the process's LISTEN connection.
 */
export class HostChooser {
  private current = 0;
  constructor(readonly target: PgTarget) {}

  /** The host new connections try now, and its index. */
  next(): { index: number; host: PgHost } {
    return { index: this.current, host: this.target.hosts[this.current]! };
  }

  /** The host at `index` failed: new connections try the one after it. */
  failed(index: number): void {
    if (index === this.current) this.current = (index + 1) % this.target.hosts.length;
  }

  get size(): number {
    return this.target.hosts.length;
  }

  /** Host `index` as config for one client. */
  config(index: number, base: pg.ClientConfig): pg.ClientConfig {
    const h = this.target.hosts[index]!;
    return { ...base, ...this.target.config, host: h.host, port: h.port };
  }
}

/**
 * Connects one client (the LISTEN connection) to the first host that takes it and suits, trying
 * each host once; throws the last failure.
 */
export async function connectToSuitable(chooser: HostChooser, base: pg.ClientConfig): Promise<pg.Client> {
  let last: unknown;
  for (let tries = 0; tries < chooser.size; tries++) {
    const { index } = chooser.next();
    const client = new pg.Client(chooser.config(index, base));
    client.on('error', () => {});
    try {
      await client.connect();
      const why = await suits(client, chooser.target.attrs);
      if (why)
        throw new UnsuitableHost(
          `${chooser.target.hosts[index]!.host}:${chooser.target.hosts[index]!.port} is ${why}`,
        );
      return client;
    } catch (err) {
      last = err;
      chooser.failed(index);
      await client.end().catch(() => {});
    }
  }
  throw last;
}

/**
 * A pool over several hosts: each new client is made for the chooser's host, checked against
 * target_session_attrs once connected, and a connection attempt that fails because of its host is
 * tried again on the next one, for up to `waitMs` in all (a round of every host, then 100 ms apart),
 * after which the caller gets the failure (a 503). Connections already in the pool to a host that
 * died fail on their next use and are dropped (pg-pool drops a client released with an error).
 */
export function multiHostPool(chooser: HostChooser, opts: pg.PoolConfig, waitMs: number): pg.Pool {
  class HostClient extends pg.Client {
    readonly hostIndex: number;
    constructor(cfg: pg.ClientConfig) {
      const { index } = chooser.next();
      super(chooser.config(index, cfg));
      this.hostIndex = index;
    }
    // biome-ignore lint/suspicious/noExplicitAny: pg's overloads (callback or promise)
    override connect(callback?: any): any {
      const failed = (err: unknown) => {
        if (err) chooser.failed(this.hostIndex);
      };
      if (callback) {
        return super.connect((err: Error) => {
          failed(err);
          callback(err);
        });
      }
      return super.connect().catch((err: unknown) => {
        failed(err);
        throw err;
      });
    }
  }
  class HostPool extends pg.Pool {
    // biome-ignore lint/suspicious/noExplicitAny: pg-pool's overloads (callback or promise)
    override connect(callback?: any): any {
      const p = this.connectToSuitable();
      if (!callback) return p;
      p.then(
        (c) => callback(undefined, c, c.release),
        (err) => callback(err),
      );
    }
    private async connectToSuitable(): Promise<pg.PoolClient> {
      const deadline = Date.now() + waitMs;
      for (let attempt = 1; ; attempt++) {
        try {
          return await super.connect();
        } catch (err) {
          if (!isHostFailure(err) || Date.now() >= deadline) throw err;
          if (attempt % chooser.size === 0) await sleep(100);
        }
      }
    }
  }
  return new HostPool({
    ...opts,
    Client: HostClient,
    onConnect: async (client: pg.PoolClient) => {
      const why = await suits(client, chooser.target.attrs);
      if (why) {
        const index = (client as unknown as HostClient).hostIndex;
        chooser.failed(index);
        const h = chooser.target.hosts[index]!;
        throw new UnsuitableHost(`${h.host}:${h.port} is ${why}`);
      }
    },
  } as unknown as pg.PoolConfig);
}
