import { existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';

/** Where `npm run build` puts the console (the same from src/routes and dist/routes). */
export const CONSOLE_ROOT = fileURLToPath(new URL('../../dist/console/', import.meta.url));

/** What the console reads from GET /console/config.json: how it may sign people in, and what it may promise. */
export interface ConsoleSettings {
  /** OpenID sign-in (authorization code + PKCE at the JWT issuer); null: token sign-in only. */
  oidc: { issuer: string; clientId: string; scope: string; audience: string } | null;
  /**
   * Whether a delete moves the plant to the trash (TRASH_RETENTION above 0, contract 13.2), so the
   * console offers "Undo"; false: a delete is final, and the console says so before and after.
   */
  trash: boolean;
}

export interface ConsoleOptions extends ConsoleSettings {
  /** The built console; default CONSOLE_ROOT. */
  root?: string;
}

/**
 * The console's Content-Security-Policy: nothing but its own files, no inline script or style, and
 * requests only to this origin (and the issuer's, for the OpenID discovery and code exchange).
 */
export function consoleCsp(issuer: string | null): string {
  const connect = issuer ? `'self' ${new URL(issuer).origin}` : `'self'`;
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    `connect-src ${connect}`,
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

// Vite names what it builds `name-<hash>.ext`, with a hash of 8 base64url characters. Exactly 8:
// with {8,} every `-` of a long run of them scanned the rest of the run (quadratic time).
const HASHED = /-[A-Za-z0-9_-]{8}\.[a-z0-9]+$/;
const IMMUTABLE = 'public, max-age=31536000, immutable';
// index.html and config.json are never kept: a new release's index names new hashed files.
const NOT_CACHED = 'no-store';

/**
 * The web console (CONTRACT.md section 11): the files `npm run build` made, through
 * @fastify/static with their pre-compressed copies (brotli, gzip), and its settings as JSON.
 * Hashed files are cached for good, index.html is never kept; every answer under
 * /console carries the console's security headers. GET / redirects to /console/.
 */
export function consoleRoutes(opts: ConsoleOptions) {
  const root = opts.root ?? CONSOLE_ROOT;
  const headers = {
    'content-security-policy': consoleCsp(opts.oidc?.issuer ?? null),
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
  };
  const settings: ConsoleSettings = { oidc: opts.oidc, trash: opts.trash };
  return async (app: FastifyInstance) => {
    app.get('/', { schema: { hide: true } }, (_request, reply) => reply.redirect('/console/', 302));

    await app.register(async (scope) => {
      scope.addHook('onRequest', (_request, reply, done) => {
        reply.headers(headers);
        done();
      });
      // A path that climbs out of the console (`/console/..%2f..%2fpackage.json`) names none of its
      // files, and @fastify/static refuses it with a 403 (FST_STATIC_FORBIDDEN_PATH, or send's
      // own), which would reach the client as a 403 `bad_request`. It is the usual 404, as any
      // unknown file here; every other error goes on to the app's handler.
      scope.setErrorHandler((err: FastifyError, _request, reply) => {
        if (err.statusCode === 403) return reply.callNotFound();
        throw err;
      });
      scope.get('/console/config.json', { schema: { hide: true } }, (_request, reply) => {
        reply.header('cache-control', NOT_CACHED);
        return reply.send(settings);
      });
      if (!existsSync(join(root, 'index.html'))) {
        app.log.warn(`the console is not built (no ${join(root, 'index.html')}): run npm run build`);
      }
      await scope.register(fastifyStatic, {
        root,
        prefix: '/console',
        // GET /console → 301 /console/.
        redirect: true,
        preCompressed: true,
        index: ['index.html'],
        cacheControl: false,
        serveDotFiles: false,
        setHeaders: (reply: FastifyReply, path: string) => {
          // With preCompressed, `path` may be the .br or .gz copy: judge by the original's name.
          const file = basename(path).replace(/\.(br|gz)$/, '');
          reply.header('cache-control', HASHED.test(file) ? IMMUTABLE : NOT_CACHED);
        },
      });
    });
  };
}
