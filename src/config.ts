import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';
import { parse as parseConnectionString } from 'pg-connection-string';
import { parseDuration } from './durations.js';
import { isMultiHost, PgUrlError, parsePgUrl } from './pg-url.js';

/** Service configuration, read once from flags and environment and validated at start. */
export interface Config {
  port: number;
  host: string;
  database: string;
  durability: 'full' | 'normal';
  poolSize: number;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  rateLimit: number;
  authFailureLimit: number;
  /** Open GET /events streams one user may have at once, per process; 0: no limit. */
  maxStreamsPerUser: number;
  /** GET /plants/export answers one user may have running at once, per process; 0: no limit. */
  maxExportsPerUser: number;
  /** GET /plants/export answers running at once in a process, all users together; 0: no limit. */
  maxExports: number;
  metrics: boolean;
  /**
   * The proxies whose X-Forwarded-For entries are believed (Fastify's trustProxy): their addresses
   * and CIDRs (or loopback, linklocal, uniquelocal); false: none, the socket's address is the client's.
   */
  trustProxy: false | string[];
  /** Shared rate-limit counters; empty: in memory, per process. */
  redisUrl: string;
  /** Processes serving one port. */
  workers: number;
  /** Milliseconds a client may take to send a request's headers. */
  headersTimeout: number;
  /** Milliseconds a client may take to send a whole request, body included. */
  requestTimeout: number;
  /** Milliseconds an idle keep-alive connection is kept open. */
  keepAliveTimeout: number;
  /** JWT access tokens from this issuer are accepted; empty: off (CONTRACT.md 3.1). */
  jwtIssuer: string;
  jwtAudience: string;
  /** Where the issuer's keys are; empty: discovered from the issuer's metadata. */
  jwtJwksUrl: string;
  jwtAlgorithms: string[];
  jwtUserClaim: string;
  /** Milliseconds of leeway for exp, nbf and iat. */
  jwtClockTolerance: number;
  jwtAllowUntyped: boolean;
  /** Let webhook URLs name or resolve to private, loopback or link-local addresses. */
  webhookAllowPrivate: boolean;
  /** Milliseconds a receiver has to answer one delivery. */
  webhookTimeout: number;
  /** Waits before each retry, in milliseconds (each with up to 10 % jitter). */
  webhookRetrySchedule: number[];
  /** `serve` sends webhook deliveries itself; false leaves them to `plantstore deliver` processes. */
  webhookDelivery: boolean;
  /** Milliseconds events and delivery records are kept (never less than trashRetention). */
  eventRetention: number;
  /** Milliseconds a deleted plant waits in its garden's trash (contract 13.2); 0: a delete is final. */
  trashRetention: number;
  /** Serve the web console at /console/ (and redirect / there). */
  console: boolean;
  /** A public client at the JWT issuer for the console's OpenID sign-in; empty: token sign-in only. */
  consoleClientId: string;
  /** The scopes the console asks the issuer for. */
  consoleScope: string;
  /** Where `serve` writes scheduled backups of a SQLite store; empty: none. */
  backupDir: string;
  /** Milliseconds between scheduled backups. */
  backupEvery: number;
  /** Scheduled backups kept (older ones go once a newer one checks good). */
  backupKeep: number;
  /** MiB of rendered list and search pages kept per process (src/plants/list-cache.ts); 0: none. */
  listCache: number;
  /** Milliseconds of mean event-loop delay past which (two seconds in a row) the paths that need no token are shed (503); 0: never. */
  maxEventLoopDelay: number;
}

export class ConfigError extends Error {}

type Parser<T> = (raw: string, name: string) => T;

const integer =
  (min: number, max: number): Parser<number> =>
  (raw, name) => {
    if (!/^(0|[1-9][0-9]*)$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      throw new ConfigError(
        `${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(raw)}`,
      );
    }
    return Number(raw);
  };

const oneOf =
  <T extends string>(...values: T[]): Parser<T> =>
  (raw, name) => {
    if (!(values as string[]).includes(raw)) {
      throw new ConfigError(`${name} must be one of ${values.join(', ')}, got ${JSON.stringify(raw)}`);
    }
    return raw as T;
  };

const boolean: Parser<boolean> = (raw, name) => {
  if (/^(true|1|yes|on)$/i.test(raw)) return true;
  if (/^(false|0|no|off)$/i.test(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got ${JSON.stringify(raw)}`);
};

const nonEmpty: Parser<string> = (raw, name) => {
  if (raw.trim() === '') throw new ConfigError(`${name} must not be empty`);
  return raw;
};

const httpUrl: Parser<string> = (raw, name) => {
  if (raw === '') return raw;
  let url: URL | null = null;
  try {
    url = new URL(raw);
  } catch {}
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:') || url.hash || url.username) {
    throw new ConfigError(`${name} must be an absolute http(s) URL, got ${JSON.stringify(raw)}`);
  }
  return raw;
};

const scopeList: Parser<string> = (raw, name) => {
  const list = raw.trim().split(/\s+/);
  if (raw.trim() === '' || list.some((s) => !/^[\x21\x23-\x5B\x5D-\x7E]+$/.test(s))) {
    throw new ConfigError(
      `${name} must be a space-separated list of OAuth scopes, got ${JSON.stringify(raw)}`,
    );
  }
  return list.join(' ');
};

const duration: Parser<number> = (raw, name) => {
  const ms = parseDuration(raw, { ms: true, zero: true });
  if (ms === null)
    throw new ConfigError(`${name} must be a whole number and ms, s, m, h or d, got ${JSON.stringify(raw)}`);
  return ms;
};

// A duration, or a bare 0 (off), as TRASH_RETENTION takes it.
const durationOrOff: Parser<number> = (raw, name) => {
  if (raw === '0') return 0;
  const ms = parseDuration(raw, { ms: true, zero: true });
  if (ms === null)
    throw new ConfigError(
      `${name} must be 0 (off) or a whole number and ms, s, m, h or d (like 30d), got ${JSON.stringify(raw)}`,
    );
  return ms;
};

/** Asymmetric JWS algorithms only: `none` and the HS* family are never accepted (a public key as an HMAC secret). */
export const JWT_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
];
const algorithms: Parser<string[]> = (raw, name) => {
  const list = raw.split(',').map((a) => a.trim());
  const bad = list.find((a) => !JWT_ALGORITHMS.includes(a));
  if (bad !== undefined) {
    throw new ConfigError(
      `${name} must be a comma-separated list of ${JWT_ALGORITHMS.join(', ')}; ${JSON.stringify(bad)} is not allowed`,
    );
  }
  return [...new Set(list)];
};

const schedule: Parser<number[]> = (raw, name) => {
  const list = raw.split(',').map((d) => parseDuration(d.trim(), { ms: true }));
  if (list.length > 50 || list.some((d) => d === null)) {
    throw new ConfigError(
      `${name} must be a comma-separated list of durations like 5s,5m,30m, got ${JSON.stringify(raw)}`,
    );
  }
  return list as number[];
};

const workers: Parser<number> = (raw, name) =>
  raw === 'auto' ? availableParallelism() : integer(1, 256)(raw, `${name} (or auto)`);

const redisUrl: Parser<string> = (raw, name) => {
  if (raw === '' || /^rediss?:\/\/.+/.test(raw)) return raw;
  throw new ConfigError(`${name} must be redis://… or rediss://…, got ${JSON.stringify(raw)}`);
};

// proxy-addr's (Fastify's) names for ranges, beside addresses and CIDRs.
const RANGE_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

const proxyAddress = (entry: string): boolean => {
  if (RANGE_NAMES.includes(entry)) return true;
  const [address = '', prefix, ...more] = entry.split('/');
  const family = isIP(address);
  if (family === 0 || more.length > 0) return false;
  return (
    prefix === undefined || (/^(0|[1-9][0-9]*)$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128))
  );
};

// `true` believes the left-most X-Forwarded-For, which the client writes; a hop count cannot tell
// the proxy from a client that reaches the port directly (Fastify 5.12.1 dropped it). Both refused.
const trustProxy: Parser<false | string[]> = (raw, name) => {
  const instead = `give the addresses or CIDRs of the proxies in front of plantstore (like 10.0.0.0/8,192.0.2.7)`;
  if (/^(true|yes|on)$/i.test(raw)) {
    throw new ConfigError(
      `${name} must not be true: any client could pick its own address through X-Forwarded-For; ${instead}`,
    );
  }
  if (/^(false|no|off|0)$/i.test(raw)) return false;
  if (/^[0-9]+$/.test(raw)) {
    throw new ConfigError(
      `${name} must not be a number of proxies: a client reaching plantstore directly could write those hops itself; ${instead}`,
    );
  }
  const list = raw.split(',').map((entry) => entry.trim());
  const bad = list.find((entry) => !proxyAddress(entry));
  if (bad !== undefined) {
    throw new ConfigError(
      `${name} must be false or the proxies' addresses and CIDRs (like 10.0.0.0/8,192.0.2.7, or loopback, linklocal, uniquelocal); ${JSON.stringify(bad)} is not one`,
    );
  }
  return list;
};

// Checked at start-up as the store will read it, so a bad URL is one exit-2 line here rather than an
// exit 1 from node-postgres later. No message repeats the URL: it may hold a password.
const database: Parser<string> = (raw, name) => {
  if (/^sqlite:.+/.test(raw)) return raw;
  if (/^postgres(ql)?:\/\/.+/.test(raw)) {
    try {
      if (isMultiHost(raw)) parsePgUrl(raw);
      else parseConnectionString(raw);
    } catch (err) {
      if (err instanceof PgUrlError) throw new ConfigError(`${name}: ${err.message}`);
      // node-postgres's parser says "Invalid URL" or "URI malformed" (no more) for a URL it cannot
      // read; its other refusals (a certificate file, an sslmode) name a setting, never the URL.
      if (err instanceof TypeError || err instanceof URIError) {
        throw new ConfigError(
          `${name} is not a URL node-postgres can read: check the host and port, and write a / ? # @ or % in the user name or password as %2F %3F %23 %40 %25`,
        );
      }
      throw new ConfigError(`${name}: ${(err as Error).message.replace(/\s+/g, ' ')}`);
    }
    return raw;
  }
  const scheme = /^[a-z][a-z0-9+.-]*:/i.exec(raw)?.[0];
  throw new ConfigError(
    `${name} must be sqlite:PATH or postgres://…, got ${scheme ? `a ${scheme} URL` : 'something else'} (the value is not shown: it may hold a password)`,
  );
};

interface Field<K extends keyof Config> {
  flag: string;
  env: string;
  default: Config[K];
  parse: Parser<Config[K]>;
  doc: string;
}

/** The single description of every setting: flag, variable, default, rule. README's table mirrors it. */
export const FIELDS: { [K in keyof Config]: Field<K> } = {
  port: {
    flag: '--port',
    env: 'PORT',
    default: 3000,
    parse: integer(0, 65535),
    doc: 'TCP port; 0 picks a free one',
  },
  host: { flag: '--host', env: 'HOST', default: '127.0.0.1', parse: nonEmpty, doc: 'address to listen on' },
  database: {
    flag: '--database',
    env: 'DATABASE_URL',
    default: 'sqlite:./data/plantstore.db',
    parse: database,
    doc: 'sqlite:PATH (file and folder created on first start) or postgres://… (several hosts: postgres://u@h1:5432,h2:5432/db?target_session_attrs=read-write)',
  },
  durability: {
    flag: '--durability',
    env: 'DURABILITY',
    default: 'full',
    parse: oneOf('full', 'normal'),
    doc: 'full: an acknowledged write survives power loss; normal: it survives a process crash',
  },
  poolSize: {
    flag: '--pool-size',
    env: 'DATABASE_POOL_SIZE',
    default: 10,
    parse: integer(1, 1000),
    doc: 'most PostgreSQL connections per process',
  },
  logLevel: {
    flag: '--log-level',
    env: 'LOG_LEVEL',
    default: 'info',
    parse: oneOf('fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'),
    doc: 'JSON log level',
  },
  rateLimit: {
    flag: '--rate-limit',
    env: 'RATE_LIMIT',
    default: 6000,
    parse: integer(0, 1_000_000_000),
    doc: 'requests per minute per token; 0 turns it off',
  },
  authFailureLimit: {
    flag: '--auth-failure-limit',
    env: 'AUTH_FAILURE_LIMIT',
    default: 60,
    parse: integer(0, 1_000_000_000),
    doc: 'failed authentications per minute per client address; 0 turns it off',
  },
  maxStreamsPerUser: {
    flag: '--max-streams-per-user',
    env: 'MAX_STREAMS_PER_USER',
    default: 20,
    parse: integer(0, 1_000_000),
    doc: 'open GET /events streams one user may have at once (per process); 0 turns the limit off',
  },
  maxExportsPerUser: {
    flag: '--max-exports-per-user',
    env: 'MAX_EXPORTS_PER_USER',
    default: 2,
    parse: integer(0, 1_000_000),
    doc: 'GET /plants/export answers one user may have running at once (per process); 0 turns the limit off',
  },
  maxExports: {
    flag: '--max-exports',
    env: 'MAX_EXPORTS',
    default: 8,
    parse: integer(0, 1_000_000),
    doc: 'GET /plants/export answers running at once in a process, all users together; 0 turns the limit off',
  },
  metrics: { flag: '--metrics', env: 'METRICS', default: true, parse: boolean, doc: 'serve GET /metrics' },
  trustProxy: {
    flag: '--trust-proxy',
    env: 'TRUST_PROXY',
    default: false,
    parse: trustProxy,
    doc: 'the addresses and CIDRs of the proxies in front (like 10.0.0.0/8,192.0.2.7): the client address is read from X-Forwarded-For past them (never true)',
  },
  redisUrl: {
    flag: '--redis-url',
    env: 'REDIS_URL',
    default: '',
    parse: redisUrl,
    doc: 'keep rate-limit counters in Redis, shared by every instance (default: in memory)',
  },
  workers: {
    flag: '--workers',
    env: 'WORKERS',
    default: 1,
    parse: workers,
    doc: 'processes serving the one port; auto: one per available core',
  },
  headersTimeout: {
    flag: '--headers-timeout',
    env: 'HEADERS_TIMEOUT_MS',
    default: 10_000,
    parse: integer(100, 600_000),
    doc: 'milliseconds a client may take to send the request headers (slow clients are cut off)',
  },
  requestTimeout: {
    flag: '--request-timeout',
    env: 'REQUEST_TIMEOUT_MS',
    default: 30_000,
    parse: integer(100, 600_000),
    doc: 'milliseconds a client may take to send a whole request, body included',
  },
  keepAliveTimeout: {
    flag: '--keep-alive-timeout',
    env: 'KEEP_ALIVE_TIMEOUT_MS',
    default: 5_000,
    parse: integer(100, 600_000),
    doc: 'milliseconds an idle keep-alive connection stays open',
  },
  jwtIssuer: {
    flag: '--jwt-issuer',
    env: 'JWT_ISSUER',
    default: '',
    parse: httpUrl,
    doc: 'accept JWT access tokens from this issuer (`iss` must equal it exactly); off when empty',
  },
  jwtAudience: {
    flag: '--jwt-audience',
    env: 'JWT_AUDIENCE',
    default: '',
    parse: nonEmpty,
    doc: '`aud` must contain this; required with --jwt-issuer',
  },
  jwtJwksUrl: {
    flag: '--jwt-jwks-url',
    env: 'JWT_JWKS_URL',
    default: '',
    parse: httpUrl,
    doc: "the issuer's key set; default: the jwks_uri of its OpenID or OAuth metadata",
  },
  jwtAlgorithms: {
    flag: '--jwt-algorithms',
    env: 'JWT_ALGORITHMS',
    default: ['RS256', 'PS256', 'ES256', 'EdDSA'],
    parse: algorithms,
    doc: 'accepted JWT `alg` values (never none or HS*)',
  },
  jwtUserClaim: {
    flag: '--jwt-user-claim',
    env: 'JWT_USER_CLAIM',
    default: 'sub',
    parse: nonEmpty,
    doc: 'the JWT claim that names the user',
  },
  jwtClockTolerance: {
    flag: '--jwt-clock-tolerance',
    env: 'JWT_CLOCK_TOLERANCE',
    default: 30_000,
    parse: duration,
    doc: 'leeway for exp, nbf and iat (like 30s)',
  },
  jwtAllowUntyped: {
    flag: '--jwt-allow-untyped',
    env: 'JWT_ALLOW_UNTYPED',
    default: false,
    parse: boolean,
    doc: 'also accept a JWT whose typ is JWT or absent (issuers that do not type access tokens)',
  },
  webhookAllowPrivate: {
    flag: '--webhook-allow-private',
    env: 'WEBHOOK_ALLOW_PRIVATE',
    default: false,
    parse: boolean,
    doc: 'allow webhook URLs on loopback, private, link-local and other internal addresses',
  },
  webhookTimeout: {
    flag: '--webhook-timeout',
    env: 'WEBHOOK_TIMEOUT',
    default: 15_000,
    parse: duration,
    doc: 'how long a webhook receiver has to answer (like 15s)',
  },
  webhookRetrySchedule: {
    flag: '--webhook-retry-schedule',
    env: 'WEBHOOK_RETRY_SCHEDULE',
    default: [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
    parse: schedule,
    doc: 'waits before each retry of a failed delivery (default 5s,5m,30m,2h,5h,10h,10h), each with up to 10 % jitter',
  },
  webhookDelivery: {
    flag: '--webhook-delivery',
    env: 'WEBHOOK_DELIVERY',
    default: true,
    parse: boolean,
    doc: 'send webhook deliveries from this process (false: leave them to `plantstore deliver` processes)',
  },
  eventRetention: {
    flag: '--event-retention',
    env: 'EVENT_RETENTION',
    // 30 days (contract 13.1): history and activity read the log, as far back as it keeps.
    default: 30 * 86_400_000,
    parse: duration,
    doc: 'how long events and delivery records are kept (like 30d); never below --trash-retention (default: the larger of 30d and it)',
  },
  trashRetention: {
    flag: '--trash-retention',
    env: 'TRASH_RETENTION',
    default: 30 * 86_400_000,
    parse: durationOrOff,
    doc: "how long a deleted plant waits in its garden's trash, to be restored (like 30d); 0 turns the trash off: a delete is final",
  },
  console: {
    flag: '--console',
    env: 'CONSOLE',
    default: true,
    parse: boolean,
    doc: 'serve the web console at /console/ (GET / redirects there); --no-console turns it off',
  },
  consoleClientId: {
    flag: '--console-client-id',
    env: 'CONSOLE_CLIENT_ID',
    default: '',
    parse: nonEmpty,
    doc: 'a public client id at the JWT issuer: the console offers OpenID sign-in (code + PKCE) with it',
  },
  consoleScope: {
    flag: '--console-scope',
    env: 'CONSOLE_SCOPE',
    default: 'openid plants:read plants:write',
    parse: scopeList,
    doc: 'the scopes the console asks the issuer for at OpenID sign-in',
  },
  backupDir: {
    flag: '--backup-dir',
    env: 'BACKUP_DIR',
    default: '',
    parse: nonEmpty,
    doc: 'take scheduled backups of the SQLite store into this directory (plantstore-<UTC time>.db)',
  },
  backupEvery: {
    flag: '--backup-every',
    env: 'BACKUP_EVERY',
    default: 3_600_000,
    parse: duration,
    doc: 'time between scheduled backups (like 1h)',
  },
  backupKeep: {
    flag: '--backup-keep',
    env: 'BACKUP_KEEP',
    default: 24,
    parse: integer(1, 100_000),
    doc: 'scheduled backups kept; older ones are removed once a new one checks good',
  },
  listCache: {
    flag: '--list-cache',
    env: 'LIST_CACHE',
    default: 16,
    parse: integer(0, 65_536),
    doc: 'MiB of rendered list and search pages each process keeps while they are exact; 0: none',
  },
  maxEventLoopDelay: {
    flag: '--max-event-loop-delay',
    env: 'MAX_EVENT_LOOP_DELAY',
    default: 200,
    parse: duration,
    doc: 'mean event-loop delay past which, two seconds in a row, /metrics, /openapi.json and /docs answer 503 (like 200ms); 0s turns it off',
  },
};

/** Builds the configuration: a flag beats the environment, which beats the default. */
export function loadConfig(
  env: Record<string, string | undefined>,
  flags: Partial<Record<keyof Config, string>> = {},
): Config {
  const out: Record<string, unknown> = {};
  // What was given, and how it was written and where (for a message that names both settings).
  const given = new Map<keyof Config, string>();
  for (const [key, f] of Object.entries(FIELDS) as [keyof Config, Field<keyof Config>][]) {
    const fromFlag = flags[key];
    const fromEnv = env[f.env];
    if (fromFlag !== undefined) {
      out[key] = f.parse(fromFlag, f.flag);
      given.set(key, `${f.flag} ${fromFlag}`);
    } else if (fromEnv !== undefined && fromEnv !== '') {
      out[key] = f.parse(fromEnv, f.env);
      given.set(key, `${f.env}=${fromEnv}`);
    } else out[key] = f.default;
  }
  const config = out as unknown as Config;
  // Events outlive the trash (contract 13.1): a trashed plant's history, its plant.deleted first,
  // is there for as long as it may be restored.
  if (config.trashRetention > config.eventRetention) {
    const events = given.get('eventRetention');
    if (events === undefined) config.eventRetention = config.trashRetention;
    else {
      const trash = given.get('trashRetention') ?? `${FIELDS.trashRetention.flag} 30d (the default)`;
      throw new ConfigError(
        `event retention (${events}) must not be below the trash retention (${trash}): a trashed plant's events must be kept while it may be restored; raise ${FIELDS.eventRetention.flag} or lower ${FIELDS.trashRetention.flag}`,
      );
    }
  }
  // Node refuses a headers timeout longer than the whole-request timeout.
  if (config.headersTimeout > config.requestTimeout) {
    throw new ConfigError(
      `${FIELDS.headersTimeout.flag} (${config.headersTimeout}) must not exceed ${FIELDS.requestTimeout.flag} (${config.requestTimeout})`,
    );
  }
  if (config.jwtIssuer && !config.jwtAudience) {
    throw new ConfigError(
      `${FIELDS.jwtIssuer.flag} needs ${FIELDS.jwtAudience.flag} (${FIELDS.jwtAudience.env}) too`,
    );
  }
  if (config.backupDir && !config.database.startsWith('sqlite:')) {
    throw new ConfigError(
      `${FIELDS.backupDir.flag} backs up SQLite stores; on PostgreSQL use its own tools (docs/operations.md)`,
    );
  }
  if (config.backupDir && config.database === 'sqlite::memory:') {
    throw new ConfigError(`${FIELDS.backupDir.flag} needs a store in a file, not sqlite::memory:`);
  }
  if (config.backupDir && config.backupEvery < 1000) {
    throw new ConfigError(`${FIELDS.backupEvery.flag} must be at least 1s`);
  }
  if (config.consoleClientId && !config.jwtIssuer) {
    throw new ConfigError(
      `${FIELDS.consoleClientId.flag} names a client at the JWT issuer: it needs ${FIELDS.jwtIssuer.flag} (${FIELDS.jwtIssuer.env}) too`,
    );
  }
  return config;
}

/** A configuration for tests and embedding: defaults plus overrides, no environment. */
export function testConfig(overrides: Partial<Config> = {}): Config {
  return { ...loadConfig({}), logLevel: 'silent', database: 'sqlite::memory:', ...overrides };
}
