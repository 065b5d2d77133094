import type { Config } from './config.js';

const MASK = '***';
// A setting or URL parameter whose name says it holds a secret (a password, a token, a key).
const SECRET_NAME = /pass|secret|token|key|credential/i;

/**
 * A URL with its secrets masked: the password of its user information (everything between the
 * user's ':' and the last '@' before the path, so a password holding '/' or '@' is masked whole)
 * and the value of every query parameter whose name says it is secret (sslpassword, sslkey, …).
 */
export function maskUrl(value: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(value);
  if (!scheme) return value;
  let rest = value.slice(scheme[0].length);
  const at = rest.lastIndexOf('@', rest.search(/[?#]/) < 0 ? undefined : rest.search(/[?#]/));
  if (at >= 0) {
    const colon = rest.indexOf(':');
    if (colon >= 0 && colon < at) rest = `${rest.slice(0, colon)}:${MASK}${rest.slice(at)}`;
  }
  const q = rest.indexOf('?');
  if (q < 0) return scheme[0] + rest;
  const [query, fragment = ''] = rest.slice(q + 1).split(/#(.*)/s);
  const params = query!
    .split('&')
    .map((p) => {
      const eq = p.indexOf('=');
      return eq > 0 && SECRET_NAME.test(p.slice(0, eq)) ? `${p.slice(0, eq + 1)}${MASK}` : p;
    })
    .join('&');
  return `${scheme[0]}${rest.slice(0, q)}?${params}${fragment ? `#${fragment}` : ''}`;
}

/** The configuration as `serve` logs it once at start: every setting, secrets masked. */
export function effectiveConfig(config: Config): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(config)) {
    if (SECRET_NAME.test(key) && typeof value === 'string' && value !== '') out[key] = MASK;
    else out[key] = typeof value === 'string' ? maskUrl(value) : value;
  }
  return out;
}
