import { can } from 'plantstore/client';
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { type Api, ApiContext } from './api.js';
import {
  describe,
  forgetToken,
  isStatus,
  keepToken,
  openSession,
  rememberedToken,
  type Session,
  type Settings,
} from './session.js';
import { applyTheme, followSystem, initialDark, saveTheme } from './theme.js';
import { GardensView } from './views/gardens.js';
import { LiveView } from './views/live.js';
import { PlantsView } from './views/plants.js';
import { SignIn } from './views/signin.js';
import { TokensView } from './views/tokens.js';
import { TrashView } from './views/trash.js';
import { WebhooksView } from './views/webhooks.js';

const VIEWS = [
  { path: 'plants', label: 'Plants', View: PlantsView },
  { path: 'trash', label: 'Trash', View: TrashView },
  { path: 'gardens', label: 'Gardens', View: GardensView },
  { path: 'live', label: 'Live', View: LiveView },
  { path: 'webhooks', label: 'Webhooks', View: WebhooksView },
  { path: 'tokens', label: 'Tokens', View: TokensView },
] as const;
type ViewPath = (typeof VIEWS)[number]['path'];

/** The view a hash names (`#/gardens`); null for any other hash (the skip link's `#main`). */
const routeOf = (hash: string): ViewPath | null => {
  const path = hash.replace(/^#\/?/, '');
  return VIEWS.find((v) => v.path === path)?.path ?? null;
};

export function App({ settings }: { settings: Settings }) {
  const [session, setSession] = useState<Session | null>(null);
  const [ready, setReady] = useState(false);
  const [notice, setNotice] = useState<string | null>(null);
  const [route, setRoute] = useState<ViewPath>(routeOf(location.hash) ?? 'plants');
  const [dark, setDark] = useState(initialDark);
  const main = useRef<HTMLElement>(null);

  useEffect(() => applyTheme(dark), [dark]);
  useEffect(() => followSystem(setDark), []);
  useEffect(() => {
    const onHash = () => {
      const r = routeOf(location.hash);
      if (r) setRoute(r);
    };
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);

  const signIn = useCallback(async (token: string, remember: boolean): Promise<string | null> => {
    try {
      const s = await openSession(token);
      keepToken(token, remember);
      setNotice(null);
      setSession(s);
      return null;
    } catch (err) {
      forgetToken();
      return isStatus(err, 401)
        ? 'The service refused this token: it is unknown, expired or revoked.'
        : describe(err);
    }
  }, []);

  const signOut = useCallback((why: string | null = null) => {
    forgetToken();
    setSession(null);
    setNotice(why);
  }, []);

  // On load: the answer of an OpenID sign-in (?code=…&state=…), else a token kept in this tab.
  useEffect(() => {
    void (async () => {
      const params = new URLSearchParams(location.search);
      if (settings.oidc && (params.has('code') || params.has('error'))) {
        const { finishSignIn } = await import('./oidc.js');
        try {
          const { token, remember } = await finishSignIn(settings.oidc);
          const error = await signIn(token, remember);
          if (error) setNotice(error);
        } catch (err) {
          setNotice(`Sign-in with your identity provider failed: ${describe(err)}`);
        }
      } else {
        const token = rememberedToken();
        if (token) {
          const error = await signIn(token, true);
          if (error) setNotice(error);
        }
      }
      setReady(true);
    })();
  }, [settings, signIn]);

  const api = useMemo<Api | null>(
    () =>
      session && {
        store: session.store,
        me: session.me,
        trash: settings.trash,
        fail: (err) => {
          if (isStatus(err, 401)) {
            signOut('The service no longer accepts your token (it expired or was revoked). Sign in again.');
          }
          return describe(err);
        },
      },
    [session, signOut, settings.trash],
  );

  const mayManageTokens = session ? can(session.me, 'tokens:manage') : false;
  const views = VIEWS.filter((v) => v.path !== 'tokens' || mayManageTokens);
  const current = views.find((v) => v.path === route) ?? views[0]!;

  // A new view: its heading takes the focus, so that keyboard and screen reader users start there.
  const first = useRef(true);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    main.current?.querySelector<HTMLElement>('h2')?.focus();
  }, [current.path, session === null]);

  const toggleTheme = (e: Event) => {
    const on = (e.currentTarget as HTMLInputElement).checked;
    setDark(on);
    saveTheme(on);
  };

  return (
    <>
      <a href="#main" class="skip">
        Skip to content
      </a>
      <header>
        <h1>plantstore console</h1>
        <div class="header-tools">
          <label class="switch">
            <input type="checkbox" checked={dark} onChange={toggleTheme} />
            Dark mode
          </label>
          {session && (
            <>
              <p class="who">
                Signed in as{' '}
                <strong>
                  <bdi>{session.me.user}</bdi>
                </strong>
              </p>
              <button type="button" onClick={() => signOut(null)}>
                Sign out
              </button>
            </>
          )}
        </div>
      </header>
      {session && (
        <nav aria-label="Console">
          <ul>
            {views.map((v) => (
              <li key={v.path}>
                <a href={`#/${v.path}`} aria-current={v.path === current.path ? 'page' : undefined}>
                  {v.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
      )}
      <main id="main" ref={main} tabIndex={-1}>
        {!ready ? (
          <p role="status">Loading…</p>
        ) : session && api ? (
          <ApiContext.Provider value={api}>
            <current.View key={session.token} />
          </ApiContext.Provider>
        ) : (
          <SignIn settings={settings} notice={notice} onSignIn={signIn} />
        )}
      </main>
    </>
  );
}
