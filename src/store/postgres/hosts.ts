import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { isMultiHost, type PgHost, type PgTarget, parsePgUrl, type SessionAttrs } from '../../pg-url.js';

export { isMultiHost, parsePgUrl };

// Several PostgreSQL hosts (contract section 6, version 4): libpq's multi-host connection strings,
// `postgres://u@h1:5432,h2:5432/db?target_session_attrs=read-write`, over node-postgres, which takes
// one host only. Each new connection goes to the host that last suited (the first one at start); a
// host that refuses, times out or does not suit target_session_attrs (a standby, or the old primary
// come back read-only) is passed over for the next, so after a failover the pool's new connections
// find the promoted standby by themselves, with no restart.

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
/** The socket's errors that mean the host or the network is gone (the store answers them 503). */
export const NET_ERRORS = [
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
