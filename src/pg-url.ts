import type pg from 'pg';
import { parse as parseConnectionString } from 'pg-connection-string';

// libpq's multi-host connection strings (contract section 6, version 4), read as libpq reads them:
// a pure parser, for the configuration's start-up check and for the store's host chooser
// (store/postgres/hosts.ts).

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
