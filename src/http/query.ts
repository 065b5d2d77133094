import type { FastifyInstance } from 'fastify';
import { BadRequestError } from '../errors.js';

// Fastify's query parser keeps a parameter that does not percent-decode to UTF-8 (`tag=%FF`,
// `q=100%`) as its raw text: a filter would then look for the text `%FF`, and a `next` link echo
// it. Such a parameter is refused instead, with the other 400s of parameters (after the token, the
// type and the size are checked).

/** The names of the parameters of `query` whose name or value is not percent-encoded UTF-8. */
export function undecodableParameters(query: string): string[] {
  const bad: string[] = [];
  for (const pair of query.split('&')) {
    if (!pair.includes('%')) continue;
    const eq = pair.indexOf('=');
    const key = (eq < 0 ? pair : pair.slice(0, eq)).replace(/\+/g, ' ');
    const value = eq < 0 ? '' : pair.slice(eq + 1).replace(/\+/g, ' ');
    const name = decoded(key);
    if (name === null || decoded(value) === null) bad.push(name ?? key);
  }
  return bad;
}

// decodeURIComponent refuses a malformed escape and bytes that are not UTF-8 (surrogates included).
function decoded(text: string): string | null {
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

/** Refuses (400) a request whose query holds a parameter that is not percent-encoded UTF-8. */
export function registerQueryCheck(app: FastifyInstance): void {
  app.addHook('preValidation', (request, _reply, done) => {
    const url = request.raw.url ?? '';
    const q = url.indexOf('?');
    if (q < 0 || !url.includes('%', q)) return done();
    const bad = undecodableParameters(url.slice(q + 1));
    if (bad.length === 0) return done();
    const name = bad[0]!.length > 40 ? `${bad[0]!.slice(0, 40)}…` : bad[0]!;
    done(
      new BadRequestError(
        'invalid_parameter',
        `query parameter ${name} is not percent-encoded UTF-8: encode each byte of its UTF-8 form as %XX, and % itself as %25`,
        bad.map((b) => ({ field: `/${b}`, message: 'must be percent-encoded UTF-8' })),
      ),
    );
  });
}
