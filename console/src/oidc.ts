// OpenID sign-in: the authorization code flow with PKCE (S256) and `state`, for a public client,
// by oauth4webapi. Loaded only when someone uses it, so token sign-in never pays for it.
import * as oauth from 'oauth4webapi';
import type { Settings } from './session.js';

type Oidc = NonNullable<Settings['oidc']>;

// The PKCE verifier and the state live in this tab's sessionStorage for the round trip to the
// issuer only, and are removed as soon as the answer is back.
const FLOW_KEY = 'plantstore.console.oidc';

const redirectUri = () => `${location.origin}${import.meta.env.BASE_URL}`;

// http issuers are for development on one machine; oauth4webapi refuses them unless told.
const options = (issuer: URL) => (issuer.protocol === 'http:' ? { [oauth.allowInsecureRequests]: true } : {});

async function discover(cfg: Oidc): Promise<oauth.AuthorizationServer> {
  const issuer = new URL(cfg.issuer);
  const res = await oauth.discoveryRequest(issuer, { algorithm: 'oidc', ...options(issuer) });
  return oauth.processDiscoveryResponse(issuer, res);
}

/**
 * Where the token is for: Auth0 reads `audience`, RFC 8707 issuers `resource` (an absolute URI
 * only); others ignore what they do not know (RFC 6749 3.1).
 */
function audienceParams(cfg: Oidc): Record<string, string> {
  if (!cfg.audience) return {};
  let absolute = false;
  try {
    absolute = Boolean(new URL(cfg.audience).protocol);
  } catch {}
  return absolute ? { audience: cfg.audience, resource: cfg.audience } : { audience: cfg.audience };
}

/** Sends the browser to the issuer's authorization endpoint. */
export async function startSignIn(cfg: Oidc, remember: boolean): Promise<void> {
  const as = await discover(cfg);
  if (!as.authorization_endpoint) throw new Error('the issuer names no authorization endpoint');
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  sessionStorage.setItem(FLOW_KEY, JSON.stringify({ verifier, state, remember }));
  const url = new URL(as.authorization_endpoint);
  const params: Record<string, string> = {
    client_id: cfg.clientId,
    redirect_uri: redirectUri(),
    response_type: 'code',
    scope: cfg.scope,
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    ...audienceParams(cfg),
  };
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  location.assign(url.href);
}

/**
 * Takes the issuer's answer (?code=…&state=…) off the address, checks the state and exchanges the
 * code at the token endpoint with the PKCE verifier; the access token.
 */
export async function finishSignIn(cfg: Oidc): Promise<{ token: string; remember: boolean }> {
  const current = new URL(location.href);
  // The code and state leave the address bar (and the history entry) at once, whatever follows.
  history.replaceState(null, '', `${current.pathname}${current.hash}`);
  const saved = sessionStorage.getItem(FLOW_KEY);
  sessionStorage.removeItem(FLOW_KEY);
  if (!saved) throw new Error('this sign-in was not started here (or was already used); start again');
  const flow = JSON.parse(saved) as { verifier: string; state: string; remember: boolean };
  const as = await discover(cfg);
  const client: oauth.Client = { client_id: cfg.clientId };
  const params = oauth.validateAuthResponse(as, client, current, flow.state);
  const issuer = new URL(cfg.issuer);
  const res = await oauth.authorizationCodeGrantRequest(
    as,
    client,
    oauth.None(),
    params,
    redirectUri(),
    flow.verifier,
    { ...options(issuer), additionalParameters: audienceParams(cfg) },
  );
  const body = await oauth.processAuthorizationCodeResponse(as, client, res);
  return { token: body.access_token, remember: flow.remember };
}
