import { useState } from 'preact/hooks';
import type { Settings } from '../session.js';
import { describe } from '../session.js';
import { ErrorText } from '../ui.js';

export function SignIn(props: {
  settings: Settings;
  notice: string | null;
  onSignIn: (token: string, remember: boolean) => Promise<string | null>;
}) {
  const [token, setToken] = useState('');
  const [remember, setRemember] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const oidc = props.settings.oidc;

  const submit = async (e: Event) => {
    e.preventDefault();
    if (busy) return;
    const value = token.trim();
    if (!value) {
      setError('Paste an access token first.');
      return;
    }
    setBusy(true);
    const failure = await props.onSignIn(value, remember);
    setBusy(false);
    if (failure) setError(failure);
  };

  const withIssuer = async () => {
    if (!oidc) return;
    setError(null);
    try {
      const { startSignIn } = await import('../oidc.js');
      await startSignIn(oidc, remember);
    } catch (err) {
      setError(`Could not reach your identity provider: ${describe(err)}`);
    }
  };

  return (
    <section aria-labelledby="signin-h">
      <h2 id="signin-h" tabIndex={-1}>
        Sign in
      </h2>
      {props.notice && (
        <p role="alert" class="notice">
          {props.notice}
        </p>
      )}
      <form onSubmit={submit} class="stack narrow">
        <div class="field">
          <label for="signin-token">Access token</label>
          <input
            id="signin-token"
            type="password"
            autocomplete="off"
            spellcheck={false}
            value={token}
            onInput={(e) => setToken(e.currentTarget.value)}
            aria-describedby="signin-token-help"
          />
          <p id="signin-token-help" class="help">
            A plantstore token (<code>pst_…</code>, from <code>plantstore token create</code>) or a JWT access
            token from your identity provider.
          </p>
        </div>
        <label class="check">
          <input type="checkbox" checked={remember} onChange={(e) => setRemember(e.currentTarget.checked)} />
          Remember in this tab
        </label>
        <ErrorText error={error} />
        <div class="actions">
          <button type="submit" class="primary">
            Sign in
          </button>
          {oidc && (
            <button type="button" onClick={withIssuer}>
              Sign in with your identity provider
            </button>
          )}
        </div>
      </form>
      <p class="help">
        The token stays in this page's memory; with “Remember in this tab” it is also kept in this tab until
        the tab closes. It is never written to a cookie, to lasting storage or to an address.
      </p>
    </section>
  );
}
