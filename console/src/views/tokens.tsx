import type { Token } from 'plantstore/client';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { useApi } from '../api.js';
import { Confirm, ErrorText, Secret, Status, when } from '../ui.js';

const SCOPES = ['plants:read', 'plants:write', 'plants:admin', 'tokens:manage'] as const;
type Scope = (typeof SCOPES)[number];

export function TokensView() {
  const { store, me, fail } = useApi();
  const [tokens, setTokens] = useState<Token[] | null>(null);
  const [next, setNext] = useState<string | null>(null);
  const [made, setMade] = useState<{ label: string; value: string } | null>(null);
  const [revoking, setRevoking] = useState<Token | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [confirmError, setConfirmError] = useState<string | null>(null);
  const [status, setStatus] = useState('');
  const heading = useRef<HTMLHeadingElement>(null);
  // Only scopes the caller holds can be given (an admin may give any).
  const grantable = SCOPES.filter((s) => me.scopes.includes(s) || me.scopes.includes('plants:admin'));
  const [name, setName] = useState('');
  const [expiresIn, setExpiresIn] = useState('');
  const [scopes, setScopes] = useState<Scope[]>(
    (['plants:read', 'plants:write'] as Scope[]).filter((s) => grantable.includes(s)),
  );
  const busy = useRef(false);

  const load = useCallback(
    async (from: string | null) => {
      try {
        const page = await store.tokens.list({ limit: 50, next: from });
        setTokens((list) => (from && list ? [...list, ...page.tokens] : page.tokens));
        setNext(page.next);
        setError(null);
      } catch (err) {
        setError(fail(err));
      }
    },
    [store, fail],
  );
  useEffect(() => {
    void load(null);
  }, [load]);

  const create = async (e: Event) => {
    e.preventDefault();
    if (busy.current) return;
    if (scopes.length === 0) {
      setError('Choose at least one scope.');
      return;
    }
    busy.current = true;
    try {
      const t = await store.tokens.create({
        scopes,
        ...(name.trim() ? { name: name.trim() } : {}),
        ...(expiresIn.trim() ? { expiresIn: expiresIn.trim() } : {}),
      });
      setMade({ label: `New token ${t.name ?? t.id}`, value: t.token });
      setName('');
      setExpiresIn('');
      setStatus(`Created the token ${t.id}${t.expiresAt ? `, valid until ${when(t.expiresAt)}` : ''}.`);
      await load(null);
    } catch (err) {
      setError(fail(err));
    } finally {
      busy.current = false;
    }
  };

  const revoke = async () => {
    if (!revoking) return;
    try {
      await store.tokens.revoke(revoking.id);
      setStatus(`Revoked ${revoking.name ?? revoking.id}: it stops working everywhere within 5 seconds.`);
      setRevoking(null);
      heading.current?.focus();
      await load(null);
    } catch (err) {
      setConfirmError(fail(err));
    }
  };

  return (
    <section aria-labelledby="tokens-h">
      <h2 id="tokens-h" ref={heading} tabIndex={-1}>
        Tokens
      </h2>
      <form class="panel stack" onSubmit={create} aria-labelledby="new-token-h">
        <h3 id="new-token-h">New token</h3>
        <div class="field">
          <label for="token-name">Token name</label>
          <input
            id="token-name"
            maxLength={200}
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
            autocomplete="off"
          />
        </div>
        <fieldset>
          <legend>Scopes</legend>
          {grantable.map((s) => (
            <label class="check" key={s}>
              <input
                type="checkbox"
                checked={scopes.includes(s)}
                onChange={(e) =>
                  setScopes(e.currentTarget.checked ? [...scopes, s] : scopes.filter((x) => x !== s))
                }
              />
              {s}
            </label>
          ))}
        </fieldset>
        <div class="field">
          <label for="token-expires">Expires in</label>
          <input
            id="token-expires"
            value={expiresIn}
            onInput={(e) => setExpiresIn(e.currentTarget.value)}
            pattern="[1-9][0-9]*[smhd]"
            aria-describedby="token-expires-help"
            autocomplete="off"
          />
          <p id="token-expires-help" class="help">
            Like 30d, 12h or 90m. Empty: it never expires (or expires with your own token, if yours does).
          </p>
        </div>
        <div class="actions">
          <button type="submit" class="primary">
            Create token
          </button>
        </div>
      </form>
      {made && <Secret label={made.label} value={made.value} onDone={() => setMade(null)} />}
      <Status message={status} />
      <ErrorText error={error} />
      {tokens && tokens.length === 0 && <p>No tokens.</p>}
      {tokens && tokens.length > 0 && (
        <table>
          <caption class="visually-hidden">Tokens, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Id</th>
              <th scope="col">User</th>
              <th scope="col">Scopes</th>
              <th scope="col">Created</th>
              <th scope="col">Expires</th>
              <th scope="col">Last used</th>
              <th scope="col">Status</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {tokens.map((t) => (
              <tr key={t.id}>
                <td>
                  {t.name ?? '—'}
                  {t.id === me.tokenId ? ' (this one)' : ''}
                </td>
                <td>
                  <code>{t.id}</code>
                </td>
                <td>{t.user}</td>
                <td>{t.scopes.join(' ')}</td>
                <td>{when(t.createdAt)}</td>
                <td>{t.expiresAt ? when(t.expiresAt) : 'never'}</td>
                <td>{when(t.lastUsedAt)}</td>
                <td>
                  <span class={`badge ${t.status}`}>{t.status}</span>
                </td>
                <td class="row-actions">
                  {t.status === 'active' && (
                    <button
                      type="button"
                      class="danger"
                      aria-label={`Revoke ${t.name ?? t.id}`}
                      onClick={() => {
                        setConfirmError(null);
                        setRevoking(t);
                      }}
                    >
                      Revoke
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {next && (
        <div class="actions">
          <button type="button" onClick={() => load(next)}>
            More tokens
          </button>
        </div>
      )}
      {revoking && (
        <Confirm
          title="Revoke token"
          question={`Revoke ${revoking.name ?? revoking.id}${revoking.id === me.tokenId ? ', the token you are signed in with' : ''}? It stops working everywhere within 5 seconds.`}
          action="Revoke"
          error={confirmError}
          onConfirm={revoke}
          onCancel={() => setRevoking(null)}
        />
      )}
    </section>
  );
}
