import type { DeliveryAttempt, Webhook } from 'plantstore/client';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { can, useApi } from '../api.js';
import { Confirm, ErrorText, Secret, Status, when } from '../ui.js';

const TYPES = ['plant.created', 'plant.updated', 'plant.deleted'] as const;

export function WebhooksView() {
  const { store, me, fail } = useApi();
  const [endpoints, setEndpoints] = useState<Webhook[] | null>(null);
  const [creating, setCreating] = useState(false);
  // A secret just made (by a create or a rotation): shown once, then forgotten.
  const [secret, setSecret] = useState<{ label: string; value: string } | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const [deleting, setDeleting] = useState<Webhook | null>(null);
  const [rotating, setRotating] = useState<Webhook | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [confirmError, setConfirmError] = useState<string | null>(null);
  const [status, setStatus] = useState('');
  const heading = useRef<HTMLHeadingElement>(null);
  const write = can(me, 'plants:write');

  const load = useCallback(async () => {
    try {
      setEndpoints(await store.webhooks.list());
      setError(null);
    } catch (err) {
      setError(fail(err));
    }
  }, [store, fail]);
  useEffect(() => {
    void load();
  }, [load]);

  const remove = async () => {
    if (!deleting) return;
    try {
      await store.webhooks.delete(deleting.id);
      setStatus(`Deleted the endpoint ${deleting.url}.`);
      if (open === deleting.id) setOpen(null);
      setDeleting(null);
      heading.current?.focus();
      await load();
    } catch (err) {
      setConfirmError(fail(err));
    }
  };
  const rotate = async () => {
    if (!rotating) return;
    try {
      const e = await store.webhooks.rotateSecret(rotating.id);
      setRotating(null);
      setSecret({ label: `New signing secret for ${e.url}`, value: e.secret });
      setStatus('The secret was rotated; the old one keeps signing beside it for 24 hours.');
    } catch (err) {
      setConfirmError(fail(err));
    }
  };

  return (
    <section aria-labelledby="webhooks-h">
      <h2 id="webhooks-h" ref={heading} tabIndex={-1}>
        Webhooks
      </h2>
      <p class="help">
        plantstore sends each plant event to these URLs, signed as Standard Webhooks specify, and retries
        until the receiver answers 2xx.
      </p>
      {write && (
        <div class="actions">
          <button
            type="button"
            class="primary"
            aria-expanded={creating}
            aria-controls="new-endpoint"
            onClick={() => setCreating(!creating)}
          >
            New endpoint
          </button>
        </div>
      )}
      {creating && (
        <NewEndpoint
          onDone={async (made) => {
            setCreating(false);
            if (made) {
              setSecret({ label: `Signing secret for ${made.url}`, value: made.secret });
              setStatus(`Created the endpoint ${made.url}.`);
              await load();
            }
          }}
        />
      )}
      {secret && <Secret label={secret.label} value={secret.value} onDone={() => setSecret(null)} />}
      <Status message={status} />
      <ErrorText error={error} />
      {endpoints && endpoints.length === 0 && <p>No endpoints yet.</p>}
      {endpoints && endpoints.length > 0 && (
        <table>
          <caption class="visually-hidden">Webhook endpoints</caption>
          <thead>
            <tr>
              <th scope="col">URL</th>
              <th scope="col">Status</th>
              <th scope="col">Events</th>
              <th scope="col">Created</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {endpoints.map((e) => (
              <tr key={e.id}>
                <td class="wrap">
                  {e.url}
                  {e.description ? <span class="help"> — {e.description}</span> : null}
                </td>
                <td>
                  <span class={`badge ${e.status}`}>{e.status}</span>
                  {e.disabledReason ? <span class="help"> ({e.disabledReason})</span> : null}
                </td>
                <td>{e.events.join(', ')}</td>
                <td>{when(e.createdAt)}</td>
                <td class="row-actions">
                  <button
                    type="button"
                    aria-label={`Deliveries of ${e.url}`}
                    aria-pressed={open === e.id}
                    onClick={() => setOpen(open === e.id ? null : e.id)}
                  >
                    Deliveries
                  </button>
                  {write && (
                    <>
                      <button
                        type="button"
                        aria-label={`Rotate secret of ${e.url}`}
                        onClick={() => {
                          setConfirmError(null);
                          setRotating(e);
                        }}
                      >
                        Rotate secret
                      </button>
                      <button
                        type="button"
                        class="danger"
                        aria-label={`Delete ${e.url}`}
                        onClick={() => {
                          setConfirmError(null);
                          setDeleting(e);
                        }}
                      >
                        Delete
                      </button>
                    </>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {open && endpoints?.some((e) => e.id === open) && (
        <Deliveries key={open} endpoint={endpoints.find((e) => e.id === open)!} write={write} />
      )}
      {deleting && (
        <Confirm
          title="Delete endpoint"
          question={`Delete the endpoint ${deleting.url}? It receives nothing more.`}
          error={confirmError}
          onConfirm={remove}
          onCancel={() => setDeleting(null)}
        />
      )}
      {rotating && (
        <Confirm
          title="Rotate secret"
          question={`Make a new signing secret for ${rotating.url}? For 24 hours deliveries carry signatures of both the old and the new one.`}
          action="Rotate"
          error={confirmError}
          onConfirm={rotate}
          onCancel={() => setRotating(null)}
        />
      )}
    </section>
  );
}

function NewEndpoint(props: { onDone: (made: { url: string; secret: string } | null) => void }) {
  const { store, fail } = useApi();
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [types, setTypes] = useState<string[]>([...TYPES]);
  const [error, setError] = useState<string | null>(null);
  const busy = useRef(false);
  const first = useRef<HTMLInputElement>(null);
  useEffect(() => first.current?.focus(), []);

  const submit = async (e: Event) => {
    e.preventDefault();
    if (busy.current) return;
    if (types.length === 0) {
      setError('Choose at least one event.');
      return;
    }
    busy.current = true;
    try {
      const made = await store.webhooks.create({
        url: url.trim(),
        events: TYPES.filter((t) => types.includes(t)),
        ...(description.trim() ? { description: description.trim() } : {}),
      });
      props.onDone(made);
    } catch (err) {
      setError(fail(err));
    } finally {
      busy.current = false;
    }
  };

  return (
    <form id="new-endpoint" class="panel stack" onSubmit={submit} aria-labelledby="new-endpoint-h">
      <h3 id="new-endpoint-h">New endpoint</h3>
      <div class="field">
        <label for="endpoint-url">URL</label>
        <input
          id="endpoint-url"
          ref={first}
          type="url"
          required
          maxLength={2000}
          placeholder="https://hooks.example.com/plantstore"
          value={url}
          onInput={(e) => setUrl(e.currentTarget.value)}
          autocomplete="off"
        />
      </div>
      <div class="field">
        <label for="endpoint-description">Description</label>
        <input
          id="endpoint-description"
          maxLength={500}
          value={description}
          onInput={(e) => setDescription(e.currentTarget.value)}
          autocomplete="off"
        />
      </div>
      <fieldset>
        <legend>Events</legend>
        {TYPES.map((t) => (
          <label class="check" key={t}>
            <input
              type="checkbox"
              checked={types.includes(t)}
              onChange={(e) =>
                setTypes(e.currentTarget.checked ? [...types, t] : types.filter((x) => x !== t))
              }
            />
            {t}
          </label>
        ))}
      </fieldset>
      <ErrorText error={error} />
      <div class="actions">
        <button type="submit" class="primary">
          Create
        </button>
        <button type="button" onClick={() => props.onDone(null)}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** An endpoint's delivery attempts, newest first, a page at a time; and recovery since a time. */
function Deliveries(props: { endpoint: Webhook; write: boolean }) {
  const { store, fail } = useApi();
  const { endpoint } = props;
  const [attempts, setAttempts] = useState<DeliveryAttempt[] | null>(null);
  const [next, setNext] = useState<string | null>(null);
  const [since, setSince] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState('');
  const heading = useRef<HTMLHeadingElement>(null);

  const load = useCallback(
    async (from: string | null) => {
      try {
        const page = await store.webhooks.deliveries(endpoint.id, { limit: 25, next: from });
        setAttempts((list) => (from && list ? [...list, ...page.attempts] : page.attempts));
        setNext(page.next);
        setError(null);
      } catch (err) {
        setError(fail(err));
      }
    },
    [store, fail, endpoint.id],
  );
  useEffect(() => {
    void load(null);
    heading.current?.focus();
  }, [load]);

  const recover = async (e: Event) => {
    e.preventDefault();
    const at = new Date(since);
    if (Number.isNaN(at.getTime())) {
      setError('Give the time to re-send from.');
      return;
    }
    try {
      const queued = await store.webhooks.recover(endpoint.id, at);
      setStatus(`${queued} ${queued === 1 ? 'event' : 'events'} queued to be sent again.`);
      setError(null);
      await load(null);
    } catch (err) {
      setError(fail(err));
    }
  };

  return (
    <section class="panel" aria-labelledby="deliveries-h">
      <h3 id="deliveries-h" ref={heading} tabIndex={-1}>
        Deliveries of {endpoint.url}
      </h3>
      <Status message={status} />
      <ErrorText error={error} />
      {attempts && attempts.length === 0 && <p>No delivery attempts yet.</p>}
      {attempts && attempts.length > 0 && (
        <table>
          <caption class="visually-hidden">Delivery attempts, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Event</th>
              <th scope="col">Attempt</th>
              <th scope="col">Outcome</th>
              <th scope="col">Response code</th>
              <th scope="col">Next retry</th>
            </tr>
          </thead>
          <tbody>
            {attempts.map((a) => (
              <tr key={a.id}>
                <td>{when(a.timestamp)}</td>
                <td>
                  {a.eventType} <span class="help">{a.eventId}</span>
                </td>
                <td>{a.attempt}</td>
                <td>
                  <span class={`badge ${a.outcome}`}>{a.outcome}</span>
                  {a.error ? <span class="help"> ({a.error})</span> : null}
                </td>
                <td>{a.status ?? 'none'}</td>
                <td>{when(a.nextAttemptAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {next && (
        <div class="actions">
          <button type="button" onClick={() => load(next)}>
            More deliveries
          </button>
        </div>
      )}
      {props.write && (
        <form class="toolbar" onSubmit={recover} aria-label="Recover">
          <div class="field">
            <label for="recover-since">Re-send what was not acknowledged since</label>
            <input
              id="recover-since"
              type="datetime-local"
              required
              value={since}
              onInput={(e) => setSince(e.currentTarget.value)}
            />
          </div>
          <button type="submit">Recover</button>
        </form>
      )}
    </section>
  );
}
