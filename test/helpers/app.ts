import { randomUUID } from 'node:crypto';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { type AppDeps, buildApp } from '../../src/app.js';
import { type Config, testConfig } from '../../src/config.js';
import { createToken } from '../../src/identity/tokens.js';
import type { Scope } from '../../src/schemas/token.js';
import type { Store } from '../../src/store/store.js';
import type { Engine } from './engines.js';

export interface Harness {
  app: FastifyInstance;
  store: Store;
  /** A new user with a token of the given scopes. */
  user(scopes?: Scope[]): Promise<Client>;
  close(): Promise<void>;
}

export interface Client {
  user: string;
  token: string;
  tokenId: string;
  auth: { authorization: string };
  request(opts: InjectOptions): Promise<LightMyRequestResponse>;
  create(body: unknown, headers?: Record<string, string>): Promise<LightMyRequestResponse>;
}

/** Builds the production app (same buildApp as `serve`) on a fresh store of the engine. */
export async function harness(
  engine: Engine,
  config: Partial<Config> = {},
  deps: AppDeps = {},
): Promise<Harness> {
  const store = await engine.open();
  const app = await buildApp(testConfig(config), { ...deps, store });
  return {
    app,
    store,
    user: (scopes) => clientAs({ app, store }, `user-${randomUUID()}`, scopes),
    async close() {
      await app.close();
      await store.close();
    },
  };
}

/** A client of the app whose new token, of these scopes, names exactly this user. */
export async function clientAs(
  h: Pick<Harness, 'app' | 'store'>,
  user: string,
  scopes: Scope[] = ['plants:read', 'plants:write'],
): Promise<Client> {
  const { record, secret } = await createToken(h.store, { user, scopes, name: null, expiresInMs: null });
  const auth = { authorization: `Bearer ${secret}` };
  const request = (opts: InjectOptions) =>
    h.app.inject({ ...opts, headers: { ...auth, ...(opts.headers ?? {}) } });
  return {
    user,
    token: secret,
    tokenId: record.id,
    auth,
    request,
    create: (body, headers = {}) =>
      request({
        method: 'POST',
        url: '/plants',
        headers: { 'content-type': 'application/json', ...headers },
        payload: JSON.stringify(body),
      }),
  };
}

/** The id a 201's Location header names. */
export function locationId(res: LightMyRequestResponse): number {
  const m = /^\/plants\/([0-9]+)$/.exec(String(res.headers.location));
  if (!m) throw new Error(`no plant Location in ${JSON.stringify(res.headers)}`);
  return Number(m[1]);
}

/** Asserts the contract's error body and content type; returns the body. */
export function errorBody(res: LightMyRequestResponse): {
  error: number;
  code: string;
  message: string;
  details?: unknown[];
} {
  if (!String(res.headers['content-type']).startsWith('application/json; charset=utf-8')) {
    throw new Error(`error response has content-type ${res.headers['content-type']}`);
  }
  const body = res.json();
  if (body.error !== res.statusCode || typeof body.code !== 'string' || typeof body.message !== 'string') {
    throw new Error(`not a contract error body: ${res.body}`);
  }
  return body;
}
