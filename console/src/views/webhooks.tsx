import { can, type DeliveryAttempt, type Webhook, type WebhookCreate } from 'plantstore/client';
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { useApi } from '../api.js';
import { Choices, FormButtons, FormPanel, TextField, useForm } from '../fields.js';
import { useLoad, usePages } from '../load.js';
import { DeleteButton, More, RowButton, Table } from '../table.js';
import { Confirm, ErrorText, Loading, Name, Opener, Secret, Status, useAsking, View, when } from '../ui.js';

// Every event type the service sends (contract sections 8 and 13): an endpoint gets all by default.
const TYPES = [
  'plant.created',
  'plant.updated',
  'plant.deleted',
  'plant.restored',
  'plant.purged',
  'member.added',
  'member.changed',
  'member.removed',
] as const satisfies readonly NonNullable<WebhookCreate['events']>[number][];
type Type = (typeof TYPES)[number];

export function WebhooksView() {
  const { store, me } = useApi();
  // A secret just made (by a create or a rotation): shown once, then forgotten.
  const [secret, setSecret] = useState<{ label: string; of: string; value: string } | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const asking = useAsking<{ kind: 'delete' | 'rotate'; endpoint: Webhook }>();
  const [status, setStatus] = useState<ComponentChildren>('');
  const heading = useRef<HTMLHeadingElement>(null);
  const write = can(me, 'plants:write');
  const list = useLoad(useCallback(() => store.webhooks.list(), [store]));

  const remove = (endpoint: Webhook) =>
    asking.run(async () => {
      await store.webhooks.delete(endpoint.id);
      setStatus(
        <>
          Deleted the endpoint <Name of={endpoint.url} />.
        </>,
      );
      if (open === endpoint.id) setOpen(null);
      asking.close();
      heading.current?.focus();
      await list.reload();
    });
  const rotate = (endpoint: Webhook) =>
    asking.run(async () => {
      const e = await store.webhooks.rotateSecret(endpoint.id);
      asking.close();
      setSecret({ label: 'New signing secret for', of: e.url, value: e.secret });
      setStatus('The secret was rotated; the old one keeps signing beside it for 24 hours.');
    });
  const shown = list.data?.find((e) => e.id === open);

  return (
    <View id="webhooks" title="Webhooks" heading={heading} loading={list.loading}>
      <p class="help">
        plantstore sends each event of your gardens (plants and members) to these URLs, signed as Standard
        Webhooks specify, and retries until the receiver answers 2xx.
      </p>
      {write && (
        <Opener
          label="New endpoint"
          controls="new-endpoint"
          form={(close) => (
            <NewEndpoint
              onDone={async (made) => {
                close();
                if (made) {
                  setSecret({ label: 'Signing secret for', of: made.url, value: made.secret });
                  setStatus(
                    <>
                      Created the endpoint <Name of={made.url} />.
                    </>,
                  );
                  await list.reload();
                }
              }}
            />
          )}
        />
      )}
      {secret && (
        <Secret label={secret.label} of={secret.of} value={secret.value} onDone={() => setSecret(null)} />
      )}
      <Status message={status} />
      <ErrorText error={list.error} />
      {list.data && list.data.length === 0 && <p>No endpoints yet.</p>}
      {list.data && list.data.length > 0 && (
        <Table caption="Webhook endpoints" columns={['URL', 'Status', 'Events', 'Created']} actions>
          {list.data.map((e) => (
            <tr key={e.id}>
              <td>
                <Url of={e.url} />
                {e.description ? (
                  <span class="help">
                    {' '}
                    — <Name of={e.description} />
                  </span>
                ) : null}
              </td>
              <td>
                <span class={`badge ${e.status}`}>{e.status}</span>
                {e.disabledReason ? (
                  <span class="help">
                    {' '}
                    (<Name of={e.disabledReason} />)
                  </span>
                ) : null}
              </td>
              <td>{e.events.join(', ')}</td>
              <td>{when(e.createdAt)}</td>
              <td class="row-actions">
                <RowButton
                  of={e.url}
                  joined=" of "
                  pressed={open === e.id}
                  onClick={() => setOpen(open === e.id ? null : e.id)}
                >
                  Deliveries
                </RowButton>
                {write && (
                  <>
                    <RowButton
                      of={e.url}
                      joined=" of "
                      onClick={() => asking.ask({ kind: 'rotate', endpoint: e })}
                    >
                      Rotate secret
                    </RowButton>
                    <DeleteButton of={e.url} onClick={() => asking.ask({ kind: 'delete', endpoint: e })} />
                  </>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      {shown && <Deliveries key={shown.id} endpoint={shown} write={write} />}
      {asking.about?.kind === 'delete' && (
        <Confirm
          title="Delete endpoint"
          question={
            <>
              Delete the endpoint <Name of={asking.about.endpoint.url} />? It receives nothing more.
            </>
          }
          error={asking.error}
          onConfirm={() => remove(asking.about!.endpoint)}
          onCancel={asking.close}
        />
      )}
      {asking.about?.kind === 'rotate' && (
        <Confirm
          title="Rotate secret"
          question={
            <>
              Make a new signing secret for <Name of={asking.about.endpoint.url} />? For 24 hours deliveries
              carry signatures of both the old and the new one.
            </>
          }
          action="Rotate"
          error={asking.error}
          onConfirm={() => rotate(asking.about!.endpoint)}
          onCancel={asking.close}
        />
      )}
    </View>
  );
}

function NewEndpoint(props: { onDone: (made: { url: string; secret: string } | null) => void }) {
  const { store } = useApi();
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [types, setTypes] = useState<Type[]>([...TYPES]);

  const form = useForm(async () => {
    if (types.length === 0) {
      form.setError('Choose at least one event.');
      return;
    }
    const made = await store.webhooks.create({
      url: url.trim(),
      events: TYPES.filter((t) => types.includes(t)),
      ...(description.trim() ? { description: description.trim() } : {}),
    });
    props.onDone(made);
  });

  return (
    <FormPanel id="new-endpoint" title="New endpoint" onSubmit={form.submit}>
      <TextField
        id="endpoint-url"
        label="URL"
        focus
        type="url"
        required
        maxLength={2000}
        placeholder="https://hooks.example.com/plantstore"
        value={url}
        onValue={setUrl}
        autocomplete="off"
      />
      <TextField
        id="endpoint-description"
        label="Description"
        maxLength={500}
        value={description}
        onValue={setDescription}
        autocomplete="off"
      />
      <Choices legend="Events" options={TYPES} chosen={types} onChange={setTypes} />
      <ErrorText error={form.error} />
      <FormButtons submit="Create" onCancel={() => props.onDone(null)} />
    </FormPanel>
  );
}

/** An endpoint's delivery attempts, newest first, a page at a time; and recovery since a time. */
function Deliveries(props: { endpoint: Webhook; write: boolean }) {
  const { store } = useApi();
  const { endpoint } = props;
  const [since, setSince] = useState('');
  const [status, setStatus] = useState('');
  const heading = useRef<HTMLHeadingElement>(null);
  const list = usePages<DeliveryAttempt>(
    useCallback(
      async (from: string | null) => {
        const page = await store.webhooks.deliveries(endpoint.id, { limit: 25, next: from });
        return { items: page.attempts, next: page.next };
      },
      [store, endpoint.id],
    ),
  );
  useEffect(() => heading.current?.focus(), []);

  const recover = async (e: Event) => {
    e.preventDefault();
    const at = new Date(since);
    if (Number.isNaN(at.getTime())) {
      list.setError('Give the time to re-send from.');
      return;
    }
    await list.attempt(async () => {
      const queued = await store.webhooks.recover(endpoint.id, at);
      setStatus(`${queued} ${queued === 1 ? 'event' : 'events'} queued to be sent again.`);
      await list.reload();
    });
  };

  return (
    <section class="panel" aria-labelledby="deliveries-h">
      <h3 id="deliveries-h" ref={heading} tabIndex={-1}>
        Deliveries of <Url of={endpoint.url} />
      </h3>
      <Status message={status} />
      <Loading on={list.loading} />
      <ErrorText error={list.error} />
      {list.data && list.data.items.length === 0 && <p>No delivery attempts yet.</p>}
      {list.data && list.data.items.length > 0 && (
        <Table
          caption="Delivery attempts, newest first"
          columns={['Time', 'Event', 'Attempt', 'Outcome', 'Response code', 'Next retry']}
        >
          {list.data.items.map((a) => (
            <tr key={a.id}>
              <td>{when(a.timestamp)}</td>
              <td>
                {a.eventType}{' '}
                <span class="help oneline" title={a.eventId}>
                  {a.eventId}
                </span>
              </td>
              <td>{a.attempt}</td>
              <td>
                <span class={`badge ${a.outcome}`}>{a.outcome}</span>
                {a.error ? (
                  <span class="help">
                    {' '}
                    (<Name of={a.error} />)
                  </span>
                ) : null}
              </td>
              <td>{a.status ?? 'none'}</td>
              <td>{when(a.nextAttemptAt)}</td>
            </tr>
          ))}
        </Table>
      )}
      <More list={list} label="More deliveries" />
      {props.write && (
        <form class="toolbar" onSubmit={recover} aria-label="Recover">
          <TextField
            id="recover-since"
            label="Re-send what was not acknowledged since"
            type="datetime-local"
            required
            value={since}
            onValue={setSince}
          />
          <button type="submit">Recover</button>
        </form>
      )}
    </section>
  );
}

/**
 * A URL on one line, never broken mid-word: cut with an ellipsis when its column is narrow, the
 * whole of it in its title and in the text that is selected and copied.
 */
const Url = ({ of }: { of: string }) => (
  <bdi class="url" title={of}>
    {of}
  </bdi>
);
