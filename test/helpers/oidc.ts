import { subscribe } from 'node:diagnostics_channel';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { exportJWK, generateKeyPair, type JWK } from 'jose';

/**
 * A REAL OpenID provider (panva's oidc-provider) on 127.0.0.1 for the e2e tests: tokens come from its
 * token endpoint exactly as a machine client would get them (client_credentials + RFC 8707 `resource`),
 * and plantstore finds the keys through discovery. For hand-forged or misbehaving tokens see helpers/issuer.ts.
 *
 * What the provider puts in an access token for `resource=<audience>` (lib/models/formats/jwt.js):
 *   header  { alg, kid, typ: 'at+jwt' }
 *   payload { jti, sub, iat, exp, scope, client_id, iss, aud }
 * For client_credentials there is no end-user (no accountId), so oidc-provider itself sets
 * `sub` = client_id (`sub: sub || clientId`); no customizer is needed.
 */
export interface Issuer {
  /** e.g. http://127.0.0.1:PORT, exactly the `iss` of the tokens. */
  issuer: string;
  /** The provider's jwks_uri, read from its discovery document. */
  jwksUri: string;
  /** The resource indicator tokens are issued for; it becomes their `aud`. */
  audience: string;
  /** Client ids the provider knows (client_secret_basic, secret from clientSecret()). */
  clients: string[];
  clientSecret(clientId: string): string;
  /** kid of the key that signs new tokens. */
  readonly currentKid: string;
  /** POST token endpoint: grant_type=client_credentials, resource=audience, scope, client_secret_basic. */
  token(opts?: { scope?: string; clientId?: string }): Promise<string>;
  /** New signing key (new kid) signs from now on; the old one stays in the key set only with keepOld. */
  rotateKeys(opts?: { keepOld?: boolean }): Promise<void>;
  /** Closes the HTTP server (connections refused) / listens again on the same port. */
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export interface IssuerOptions {
  audience?: string;
  scopes?: string[];
  /** Seconds; the access token `exp` - `iat`. */
  accessTokenTtl?: number;
  alg?: 'RS256' | 'ES256' | 'PS256' | 'EdDSA';
  clients?: string[];
}

// oidc-provider ships no type declarations; this is the little of it we use.
type NodeHandler = (req: IncomingMessage, res: ServerResponse) => void;
interface OidcProvider {
  callback(): NodeHandler;
}
interface OidcModule {
  default: new (issuer: string, config: Record<string, unknown>) => OidcProvider;
  errors: { InvalidTarget: new (description?: string) => Error };
}

let oidcModule: Promise<OidcModule> | undefined;
function loadOidc(): Promise<OidcModule> {
  // A non-literal specifier keeps tsc from demanding (missing) declarations for the package.
  const specifier: string = 'oidc-provider';
  oidcModule ??= import(specifier) as Promise<OidcModule>;
  return oidcModule;
}

/**
 * oidc-provider's own dev in-memory adapter prints a "development-only" WARNING on every construction
 * (and we construct one per key rotation). Supplying any adapter is the documented way to avoid it.
 * client_credentials with JWT access tokens persists nothing; this only serves lookups of unknown
 * (dynamic) clients, which it does not have.
 */
class MapAdapter {
  static readonly store = new Map<string, Record<string, unknown>>();
  constructor(private readonly model: string) {}
  private key(id: string) {
    return `${this.model}:${id}`;
  }
  async upsert(id: string, payload: Record<string, unknown>) {
    MapAdapter.store.set(this.key(id), payload);
  }
  async find(id: string) {
    return MapAdapter.store.get(this.key(id));
  }
  async findByUid() {
    return undefined;
  }
  async findByUserCode() {
    return undefined;
  }
  async consume(id: string) {
    const found = MapAdapter.store.get(this.key(id));
    if (found) found.consumed = Math.floor(Date.now() / 1000);
  }
  async destroy(id: string) {
    MapAdapter.store.delete(this.key(id));
  }
  async revokeByGrantId() {}
}

let kidCounter = 0;

async function newSigningKey(alg: string): Promise<JWK & { kid: string }> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  const kid = `oidc-${++kidCounter}-${Date.now().toString(36)}`;
  return { ...(await exportJWK(privateKey)), kid, alg, use: 'sig' };
}

export async function startIssuer(opts: IssuerOptions = {}): Promise<Issuer> {
  const audience = opts.audience ?? 'https://plantstore.test/api';
  const scopes = opts.scopes ?? ['plants:read', 'plants:write', 'plants:admin'];
  const alg = opts.alg ?? 'RS256';
  const ttl = opts.accessTokenTtl ?? 300;
  const clients = opts.clients ?? ['alice', 'bob'];
  const secretOf = (id: string) => `${id}-secret`;
  const { default: Provider, errors } = await loadOidc();

  // Private JWKs, newest (the signing one) first.
  let keys = [await newSigningKey(alg)];

  // oidc-provider reads `jwks` only at construction, so a rotation builds a fresh Provider with the
  // new key set and swaps it in behind the same HTTP server: same port, same issuer, no outage, and
  // nothing is lost since clients are static config and client_credentials keeps no state.
  const build = (issuer: string): NodeHandler => {
    const signingKid = keys[0]!.kid;
    const provider = new Provider(issuer, {
      adapter: MapAdapter,
      jwks: { keys: keys.map((k) => ({ ...k })) },
      clients: clients.map((id) => ({
        client_id: id,
        client_secret: secretOf(id),
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: 'client_secret_basic',
        scope: scopes.join(' '),
      })),
      scopes,
      // Clients and the resource server sign with `alg`; the default RS256 would need an RSA key.
      clientDefaults: { id_token_signed_response_alg: alg },
      // A plain number (not the default function, which prints a NOTICE): the access token lifetime.
      ttl: { ClientCredentials: ttl },
      features: {
        // No login/consent UI is ever used (and its dev version warns when hit).
        devInteractions: { enabled: false },
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          // A token request without `resource` gets no default: the tests always name the audience.
          defaultResource: () => undefined,
          useGrantedResource: () => false,
          getResourceServerInfo: (_ctx: unknown, resourceIndicator: string) => {
            // Any other resource is answered with invalid_target (400), as a real AS would.
            if (resourceIndicator !== audience) throw new errors.InvalidTarget();
            return {
              scope: scopes.join(' '),
              audience,
              accessTokenTTL: ttl,
              accessTokenFormat: 'jwt',
              // Pin the kid so the newest key signs even while an old key of the same alg is published.
              jwt: { sign: { alg, kid: signingKid } },
            };
          },
        },
      },
    });
    return provider.callback();
  };

  let handler: NodeHandler = (_req, res) => {
    res.statusCode = 503;
    res.end();
  };
  const server: Server = createServer((req, res) => handler(req, res));
  await listen(server, 0);
  const port = (server.address() as AddressInfo).port;
  const issuer = `http://127.0.0.1:${port}`;
  // This process's own sockets to the provider (fetch keeps them in its pool), so that stop() can
  // wait until each has seen its end: the next request then dials anew and is refused, instead of
  // dying on a half-closed pooled socket.
  const clientSockets = new Set<Socket>();
  subscribe('net.client.socket', (message) => {
    const socket = (message as { socket: Socket }).socket;
    socket.once('connect', () => {
      if (socket.remotePort !== port) return;
      clientSockets.add(socket);
      socket.once('close', () => clientSockets.delete(socket));
    });
  });
  handler = build(issuer);

  const discovery = (await (await fetch(`${issuer}/.well-known/openid-configuration`)).json()) as {
    issuer: string;
    jwks_uri: string;
    token_endpoint: string;
  };
  if (discovery.issuer !== issuer) throw new Error(`discovery issuer ${discovery.issuer} != ${issuer}`);

  let running = true;
  const state: Issuer = {
    issuer,
    jwksUri: discovery.jwks_uri,
    audience,
    clients,
    clientSecret: secretOf,
    get currentKid() {
      return keys[0]!.kid;
    },
    async token({ scope = scopes.join(' '), clientId = clients[0]! } = {}) {
      const res = await fetch(discovery.token_endpoint, {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${formEncode(clientId)}:${formEncode(secretOf(clientId))}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ grant_type: 'client_credentials', resource: audience, scope }),
      });
      const body = (await res.json()) as {
        access_token?: string;
        error?: string;
        error_description?: string;
      };
      if (!res.ok || !body.access_token) {
        throw new Error(`token request failed: ${res.status} ${body.error}: ${body.error_description}`);
      }
      return body.access_token;
    },
    async rotateKeys({ keepOld = true } = {}) {
      const fresh = await newSigningKey(alg);
      keys = keepOld ? [fresh, ...keys] : [fresh];
      handler = build(issuer);
    },
    async stop() {
      if (!running) return;
      running = false;
      await shut(server);
      // ('close' alone: events.once would reject on the 'error' a pooled socket reports as it ends.)
      // The pool unrefs idle sockets, so a timer of our own keeps the event loop reading until
      // their ends arrive (bounded: a socket still open after 5 s fails the next request instead).
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all([...clientSockets].map((s) => new Promise((closed) => s.once('close', closed)))),
        new Promise((bounded) => {
          timer = setTimeout(bounded, 5_000);
        }),
      ]);
      clearTimeout(timer);
    },
    async start() {
      if (running) return;
      await listen(server, port);
      running = true;
    },
    async close() {
      await state.stop();
    },
  };
  return state;
}

/** client_secret_basic wants id and secret form-urlencoded before base64 (RFC 6749 2.3.1). */
function formEncode(s: string): string {
  return encodeURIComponent(s).replace(/%20/g, '+');
}

function listen(server: Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** close() alone would wait for clients' keep-alive sockets (fetch/undici pools them); cut them. */
function shut(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((err) => (err ? reject(err) : resolve()));
    server.closeAllConnections();
  });
}
