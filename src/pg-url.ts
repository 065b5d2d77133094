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
  const parts = splitPgUrl(url);
  if (!parts)
    throw new PgUrlError('must be postgres://[user[:password]@]host[:port][,host[:port]…]/database');
  const { scheme, userinfo: raw, hostList, rest } = parts;
  // An @ past the user information means it held a / (libpq ends it there) or a second @: what
  // looks like a host may then be a piece of the password, so hosts are named by their place.
  const unsure = /@/.test(hostList + rest);
  const query = new URLSearchParams(
    rest.includes('?') ? rest.slice(rest.indexOf('?') + 1).split('#')[0] : '',
  );
  const given = query.get('target_session_attrs');
  const defaultPort = query.get('port');
  const hosts = hostList.split(',').map((h, i) => {
    try {
      return parseHost(h, defaultPort, unsure ? `host ${i + 1}` : JSON.stringify(h));
    } catch (err) {
      if (!unsure) throw err;
      throw new PgUrlError(
        `${(err as Error).message} (write a / or @ in the user name or password as %2F or %40)`,
      );
    }
  });
  if (given !== null && !(ATTRS as string[]).includes(given)) {
    throw new PgUrlError(`target_session_attrs must be ${ATTRS.join(', ')}; got ${JSON.stringify(given)}`);
  }
  query.delete('target_session_attrs');
  const path = rest.split('?')[0]!;
  const q = query.toString();
  // Re-encoded, so node-postgres's URL parser reads a ? or # of the password as the password's.
  // The user ends at the first ':'; the password, whatever it holds, is the rest.
  const colon = raw === null ? -1 : raw.indexOf(':');
  const userinfo =
    raw === null
      ? ''
      : `${(colon < 0 ? [raw] : [raw.slice(0, colon), raw.slice(colon + 1)])
          .map((piece) => encodeURIComponent(decode(piece)))
          .join(':')}@`;
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

interface PgUrlParts {
  scheme: string;
  /** As written, without its @; null when there is none. */
  userinfo: string | null;
  hostList: string;
  rest: string;
}

// libpq's reading: the user information runs to the first @ that comes before any /, so a password
// may hold ? and # as they are (it may not hold / or @: those must be percent-encoded).
function splitPgUrl(url: string): PgUrlParts | null {
  const m = /^(postgres(?:ql)?:\/\/)(?:([^@/]*)@)?([^/?#]*)(.*)$/s.exec(url);
  if (!m) return null;
  const [, scheme, userinfo = null, hostList, rest] = m as unknown as [
    string,
    string,
    string | undefined,
    string,
    string,
  ];
  return { scheme, userinfo, hostList, rest };
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new PgUrlError(
      'the user name or password has a % that is not followed by two hex digits (write % as %25)',
    );
  }
}

function parseHost(text: string, defaultPort: string | null, label: string): PgHost {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]@]+))(?::([^:]*))?$/.exec(text);
  if (!m) throw new PgUrlError(`${label} is not a host[:port] (an IPv6 address goes in brackets)`);
  const host = decodeURIComponent(m[1] ?? m[2]!);
  const portText = m[3] ?? defaultPort ?? '5432';
  if (!/^\d{1,5}$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535) {
    throw new PgUrlError(`the port of ${label} must be 1-65535`);
  }
  return { host, port: Number(portText) };
}

/** Whether a URL needs the multi-host connector (several hosts, or target_session_attrs given). */
export function isMultiHost(url: string): boolean {
  const parts = splitPgUrl(url);
  return !!parts && (parts.hostList.includes(',') || /[?&]target_session_attrs=/.test(parts.rest));
}
