import { grantableScopes, type Scope, type Token } from 'plantstore/client';
import type { ComponentChildren } from 'preact';
import { useCallback, useRef, useState } from 'preact/hooks';
import { useApi } from '../api.js';
import { Choices, FormButtons, FormPanel, TextField, useForm } from '../fields.js';
import { usePages } from '../load.js';
import { More, RowButton, Table } from '../table.js';
import { Confirm, ErrorText, Name, Secret, Status, useAsking, View, when } from '../ui.js';

export function TokensView() {
  const { store, me } = useApi();
  const [made, setMade] = useState<{ label: string; of: string; value: string } | null>(null);
  const revoking = useAsking<Token>();
  const [status, setStatus] = useState<ComponentChildren>('');
  const heading = useRef<HTMLHeadingElement>(null);
  // Only scopes the service lets this caller give are offered.
  const grantable = grantableScopes(me);
  const [name, setName] = useState('');
  const [expiresIn, setExpiresIn] = useState('');
  const [scopes, setScopes] = useState<Scope[]>(
    (['plants:read', 'plants:write'] as Scope[]).filter((s) => grantable.includes(s)),
  );
  const list = usePages(
    useCallback(
      async (from: string | null) => {
        const page = await store.tokens.list({ limit: 50, next: from });
        return { items: page.tokens, next: page.next };
      },
      [store],
    ),
  );

  const form = useForm(async () => {
    if (scopes.length === 0) {
      form.setError('Choose at least one scope.');
      return;
    }
    const t = await store.tokens.create({
      scopes,
      ...(name.trim() ? { name: name.trim() } : {}),
      ...(expiresIn.trim() ? { expiresIn: expiresIn.trim() } : {}),
    });
    form.setError(null);
    setMade({ label: 'New token', of: t.name ?? t.id, value: t.token });
    setName('');
    setExpiresIn('');
    setStatus(`Created the token ${t.id}${t.expiresAt ? `, valid until ${when(t.expiresAt)}` : ''}.`);
    await list.reload();
  });

  const revoke = (t: Token) =>
    revoking.run(async () => {
      await store.tokens.revoke(t.id);
      setStatus(
        <>
          Revoked <Name of={t.name ?? t.id} />: it stops working everywhere within 5 seconds.
        </>,
      );
      revoking.close();
      heading.current?.focus();
      await list.reload();
    });

  return (
    <View id="tokens" title="Tokens" heading={heading} loading={list.loading}>
      <FormPanel id="new-token" title="New token" onSubmit={form.submit}>
        <TextField
          id="token-name"
          label="Token name"
          maxLength={200}
          value={name}
          onValue={setName}
          autocomplete="off"
        />
        <Choices legend="Scopes" options={grantable} chosen={scopes} onChange={setScopes} />
        <TextField
          id="token-expires"
          label="Expires in"
          value={expiresIn}
          onValue={setExpiresIn}
          pattern="[1-9][0-9]*[smhd]"
          autocomplete="off"
          help="Like 30d, 12h or 90m. Empty: it never expires (or expires with your own token, if yours does)."
        />
        <FormButtons submit="Create token" />
      </FormPanel>
      {made && <Secret label={made.label} of={made.of} value={made.value} onDone={() => setMade(null)} />}
      <Status message={status} />
      <ErrorText error={form.error ?? list.error} />
      {list.data && list.data.items.length === 0 && <p>No tokens.</p>}
      {list.data && list.data.items.length > 0 && (
        <Table
          caption="Tokens, newest first"
          columns={['Name', 'Id', 'User', 'Scopes', 'Created', 'Expires', 'Last used', 'Status']}
          actions
        >
          {list.data.items.map((t) => (
            <tr key={t.id}>
              <td>
                {t.name ? <Name of={t.name} /> : '—'}
                {t.id === me.tokenId ? ' (this one)' : ''}
              </td>
              <td>
                <code class="id">{t.id}</code>
              </td>
              <td>
                <Name of={t.user} />
              </td>
              <td>{t.scopes.join(' ')}</td>
              <td>{when(t.createdAt)}</td>
              <td>{t.expiresAt ? when(t.expiresAt) : 'never'}</td>
              <td>{when(t.lastUsedAt)}</td>
              <td>
                <span class={`badge ${t.status}`}>{t.status}</span>
              </td>
              <td class="row-actions">
                {t.status === 'active' && (
                  <RowButton of={t.name ?? t.id} danger onClick={() => revoking.ask(t)}>
                    Revoke
                  </RowButton>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      <More list={list} label="More tokens" />
      {revoking.about && (
        <Confirm
          title="Revoke token"
          question={
            <>
              Revoke <Name of={revoking.about.name ?? revoking.about.id} />
              {revoking.about.id === me.tokenId ? ', the token you are signed in with' : ''}? It stops working
              everywhere within 5 seconds.
            </>
          }
          action="Revoke"
          error={revoking.error}
          onConfirm={() => revoke(revoking.about!)}
          onCancel={revoking.close}
        />
      )}
    </View>
  );
}
