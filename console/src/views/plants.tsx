import type { Garden, ListedPlant } from 'plantstore/client';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { can, useApi } from '../api.js';
import { isStatus, newKey } from '../session.js';
import { Confirm, Dialog, ErrorText, Status } from '../ui.js';

type Item = ListedPlant<'garden' | 'version'>;
const PAGE = 20;
const etagOf = (p: Item) => `"${p.version}"`;

export function PlantsView() {
  const { store, me, fail } = useApi();
  const [gardens, setGardens] = useState<Garden[]>([]);
  const [filter, setFilter] = useState({ garden: '', tag: '' });
  const [draft, setDraft] = useState({ garden: '', tag: '' });
  // The `next` path that each page read so far starts at (null: the first); the last is shown.
  const [starts, setStarts] = useState<(string | null)[]>([null]);
  const [page, setPage] = useState<{ plants: Item[]; next: string | null } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState('');
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<Item | null>(null);
  const [deleting, setDeleting] = useState<Item | null>(null);
  const [deleteError, setDeleteError] = useState<string | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);

  const load = useCallback(async () => {
    try {
      const next = starts[starts.length - 1] ?? null;
      setPage(
        await store.page({
          limit: PAGE,
          include: ['garden', 'version'],
          ...(filter.garden ? { garden: filter.garden } : {}),
          ...(filter.tag ? { tag: filter.tag } : {}),
          next,
        }),
      );
      setError(null);
    } catch (err) {
      setError(fail(err));
    }
  }, [store, fail, filter, starts]);

  useEffect(() => {
    void load();
  }, [load]);
  useEffect(() => {
    store.gardens.list().then(setGardens, (err) => setError(fail(err)));
  }, [store, fail]);

  const gardenName = (id: string) => gardens.find((g) => g.id === id)?.name ?? id;
  const mayChange = (p: Item) =>
    can(me, 'plants:write') &&
    (me.scopes.includes('plants:admin') ||
      ['editor', 'owner'].includes(gardens.find((g) => g.id === p.garden)?.role ?? ''));
  const writable = gardens.filter((g) => g.role !== 'viewer');

  const applyFilter = (e: Event) => {
    e.preventDefault();
    setFilter(draft);
    setStarts([null]);
  };

  const remove = async () => {
    if (!deleting) return;
    try {
      await store.delete(deleting.id, { ifMatch: etagOf(deleting) });
      setStatus(`Deleted “${deleting.name}”.`);
      setDeleting(null);
      heading.current?.focus();
    } catch (err) {
      if (isStatus(err, 404)) {
        setStatus(`“${deleting.name}” was already gone.`);
        setDeleting(null);
      } else if (isStatus(err, 412)) {
        setDeleteError(
          'This plant changed since the list was read. Look at it again, then delete it if you still want to.',
        );
        setDeleting(null);
      } else {
        setDeleteError(fail(err));
        return;
      }
    }
    await load();
  };

  return (
    <section aria-labelledby="plants-h">
      <h2 id="plants-h" ref={heading} tabIndex={-1}>
        Plants
      </h2>
      <form class="toolbar" onSubmit={applyFilter} aria-label="Filter plants">
        <div class="field">
          <label for="filter-garden">Filter by garden</label>
          <select
            id="filter-garden"
            value={draft.garden}
            onChange={(e) => setDraft({ ...draft, garden: e.currentTarget.value })}
          >
            <option value="">All my gardens</option>
            {gardens.map((g) => (
              <option key={g.id} value={g.id}>
                {g.name}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="filter-tag">Filter by tag</label>
          <input
            id="filter-tag"
            value={draft.tag}
            onInput={(e) => setDraft({ ...draft, tag: e.currentTarget.value })}
            maxLength={100}
          />
        </div>
        <button type="submit">Show</button>
      </form>

      {can(me, 'plants:write') && (
        <div class="actions">
          <button
            type="button"
            class="primary"
            aria-expanded={creating}
            aria-controls="new-plant"
            onClick={() => setCreating(!creating)}
          >
            New plant
          </button>
        </div>
      )}
      {creating && (
        <NewPlant
          gardens={writable}
          onDone={async (message) => {
            setCreating(false);
            if (message) {
              setStatus(message);
              await load();
            }
          }}
        />
      )}

      <Status message={status} />
      <ErrorText error={error} />
      {deleteError && !deleting && <ErrorText error={deleteError} />}

      {page && page.plants.length === 0 && (
        <p>No plants here{filter.tag || filter.garden ? ' with this filter' : ' yet'}.</p>
      )}
      {page && page.plants.length > 0 && (
        <table>
          <caption class="visually-hidden">Plants, page {starts.length}</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Tag</th>
              <th scope="col">Garden</th>
              <th scope="col">Id</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {page.plants.map((p) => (
              <tr key={p.id}>
                <td>{p.name}</td>
                <td>{p.tag ?? '—'}</td>
                <td>{gardenName(p.garden)}</td>
                <td>{p.id}</td>
                <td class="row-actions">
                  {mayChange(p) && (
                    <>
                      <button type="button" aria-label={`Change ${p.name}`} onClick={() => setEditing(p)}>
                        Change
                      </button>
                      <button
                        type="button"
                        class="danger"
                        aria-label={`Delete ${p.name}`}
                        onClick={() => {
                          setDeleteError(null);
                          setDeleting(p);
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
      <div class="actions pager">
        {starts.length > 1 && (
          <button type="button" onClick={() => setStarts(starts.slice(0, -1))}>
            Previous
          </button>
        )}
        {page?.next && (
          <button type="button" onClick={() => setStarts([...starts, page.next])}>
            Next page
          </button>
        )}
      </div>

      {editing && (
        <ChangePlant
          plant={editing}
          onDone={async (message) => {
            setEditing(null);
            if (message) {
              setStatus(message);
              await load();
            }
          }}
        />
      )}
      {deleting && (
        <Confirm
          title="Delete plant"
          question={`Delete “${deleting.name}”? This cannot be undone.`}
          error={deleteError}
          onConfirm={remove}
          onCancel={() => {
            setDeleting(null);
            setDeleteError(null);
          }}
        />
      )}
    </section>
  );
}

function NewPlant(props: { gardens: Garden[]; onDone: (message: string | null) => void }) {
  const { store, fail } = useApi();
  const [error, setError] = useState<string | null>(null);
  const busy = useRef(false);
  const name = useRef<HTMLInputElement>(null);
  useEffect(() => name.current?.focus(), []);
  const home = props.gardens.find((g) => g.home) ?? props.gardens[0];
  const [fields, setFields] = useState({ name: '', tag: '', garden: '' });
  const garden = fields.garden || home?.id || '';

  const submit = async (e: Event) => {
    e.preventDefault();
    if (busy.current) return;
    const plant = { name: fields.name, tag: fields.tag || null };
    busy.current = true;
    try {
      const made = await store.create(plant, { idempotencyKey: newKey(), ...(garden ? { garden } : {}) });
      props.onDone(`Created “${made.name}” (id ${made.id}).`);
    } catch (err) {
      setError(fail(err));
    } finally {
      busy.current = false;
    }
  };

  return (
    <form id="new-plant" class="panel stack" onSubmit={submit} aria-labelledby="new-plant-h">
      <h3 id="new-plant-h">New plant</h3>
      <div class="field">
        <label for="new-plant-name">Name</label>
        <input
          id="new-plant-name"
          ref={name}
          value={fields.name}
          onInput={(e) => setFields({ ...fields, name: e.currentTarget.value })}
          required
          maxLength={200}
          autocomplete="off"
        />
      </div>
      <div class="field">
        <label for="new-plant-tag">Tag</label>
        <input
          id="new-plant-tag"
          value={fields.tag}
          onInput={(e) => setFields({ ...fields, tag: e.currentTarget.value })}
          maxLength={100}
          autocomplete="off"
          aria-describedby="new-plant-tag-help"
        />
        <p id="new-plant-tag-help" class="help">
          Optional.
        </p>
      </div>
      <div class="field">
        <label for="new-plant-garden">Garden</label>
        <select
          id="new-plant-garden"
          value={garden}
          onChange={(e) => setFields({ ...fields, garden: e.currentTarget.value })}
        >
          {props.gardens.map((g) => (
            <option key={g.id} value={g.id}>
              {g.name}
              {g.home ? ' (home)' : ''}
            </option>
          ))}
        </select>
      </div>
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

/**
 * Changes a plant with If-Match of the version the list showed. When someone changed it meanwhile
 * (412), shows what it is now and lets the person apply the same change again, on that version.
 */
function ChangePlant(props: { plant: Item; onDone: (message: string | null) => void }) {
  const { store, fail } = useApi();
  const { plant } = props;
  const [name, setName] = useState(plant.name);
  const [tag, setTag] = useState(plant.tag ?? '');
  const [etag, setEtag] = useState(etagOf(plant));
  const [base, setBase] = useState<{ name: string; tag: string }>({ name: plant.name, tag: plant.tag ?? '' });
  const [conflict, setConflict] = useState<{ name: string; tag: string | undefined } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const busy = useRef(false);

  const save = async (e?: Event) => {
    e?.preventDefault();
    if (busy.current) return;
    const patch: { name?: string; tag?: string | null } = {};
    if (name !== base.name) patch.name = name;
    if (tag !== base.tag) patch.tag = tag === '' ? null : tag;
    if (Object.keys(patch).length === 0) return props.onDone('Nothing to change.');
    busy.current = true;
    try {
      const saved = await store.update(plant.id, patch, { ifMatch: etag, idempotencyKey: newKey() });
      props.onDone(`Saved “${saved.name}”.`);
    } catch (err) {
      if (isStatus(err, 412)) {
        try {
          const now = await store.get(plant.id);
          setConflict({ name: now.name, tag: now.tag });
          setBase({ name: now.name, tag: now.tag ?? '' });
          setEtag(now.etag);
          setError(null);
        } catch (again) {
          setError(isStatus(again, 404) ? 'This plant was deleted meanwhile.' : fail(again));
        }
      } else {
        setError(fail(err));
      }
    } finally {
      busy.current = false;
    }
  };

  return (
    <Dialog title={`Change ${plant.name}`} onClose={() => props.onDone(null)}>
      <form class="stack" onSubmit={save}>
        {conflict && (
          <div role="alert" class="notice">
            <p>Someone changed this plant after you opened it. It is now:</p>
            <dl>
              <dt>Name</dt>
              <dd>{conflict.name}</dd>
              <dt>Tag</dt>
              <dd>{conflict.tag ?? '(none)'}</dd>
            </dl>
            <p>Your change is still in the fields below. Apply it again to this version, or cancel.</p>
          </div>
        )}
        <div class="field">
          <label for="change-name">Name</label>
          <input
            id="change-name"
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
            required
            maxLength={200}
          />
        </div>
        <div class="field">
          <label for="change-tag">Tag</label>
          <input
            id="change-tag"
            value={tag}
            onInput={(e) => setTag(e.currentTarget.value)}
            maxLength={100}
            aria-describedby="change-tag-help"
          />
          <p id="change-tag-help" class="help">
            Empty removes the tag.
          </p>
        </div>
        <ErrorText error={error} />
        <div class="actions">
          <button type="submit" class="primary">
            {conflict ? 'Apply my change again' : 'Save'}
          </button>
          <button type="button" onClick={() => props.onDone(null)}>
            Cancel
          </button>
        </div>
      </form>
    </Dialog>
  );
}
