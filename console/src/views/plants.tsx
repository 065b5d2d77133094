import { can, capabilities, etagOf, type Garden, type ListedPlant } from 'plantstore/client';
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { useApi } from '../api.js';
import { EventList } from '../events.js';
import { FormButtons, FormPanel, SelectField, TextField, useForm } from '../fields.js';
import { useLoad } from '../load.js';
import { isStatus, newKey } from '../session.js';
import { DeleteButton, RowButton, Table } from '../table.js';
import { Confirm, Dialog, ErrorText, Name, Opener, Quoted, Status, useAsking, View } from '../ui.js';
import { ExportLinks, ImportButton } from './plant-files.js';

type Item = ListedPlant<'garden' | 'version'>;
const PAGE = 20;

export function PlantsView() {
  const { store, me, fail, trash } = useApi();
  const [filter, setFilter] = useState({ garden: '', tag: '', q: '' });
  const [draft, setDraft] = useState({ garden: '', tag: '' });
  // What is typed in "Search plants": searched a moment after the typing stops.
  const [typed, setTyped] = useState('');
  useEffect(() => {
    const q = typed.trim();
    if (q === filter.q) return;
    const timer = setTimeout(() => {
      setFilter((f) => ({ ...f, q }));
      setStarts([null]);
      setMade(null);
    }, 250);
    return () => clearTimeout(timer);
  }, [typed, filter.q]);
  // The `next` path that each page read so far starts at (null: the first); the last is shown.
  const [starts, setStarts] = useState<(string | null)[]>([null]);
  const [status, setStatus] = useState<ComponentChildren>('');
  // The plant just deleted, while its "Undo" is offered (until the next message replaces it).
  const [trashed, setTrashed] = useState<Item | null>(null);
  const say = (message: ComponentChildren, undoable: Item | null = null) => {
    setStatus(message);
    setTrashed(undoable);
  };
  // The plant just created (or brought back from the trash): shown at the top of the list, marked,
  // until the person moves on (with 20 a page in id order it is often on another page, and would
  // seem to vanish).
  const [made, setMade] = useState<Item | null>(null);
  const [mark, setMark] = useState('new');
  const [editing, setEditing] = useState<Item | null>(null);
  const [history, setHistory] = useState<Item | null>(null);
  const deleting = useAsking<Item>();
  const heading = useRef<HTMLHeadingElement>(null);
  const undoButton = useRef<HTMLButtonElement>(null);
  // "Undo" takes the focus when it appears: the Delete button that had it is gone with its row.
  useEffect(() => {
    if (trashed) undoButton.current?.focus();
  }, [trashed]);

  const page = useLoad(
    useCallback(
      () =>
        store.page({
          limit: PAGE,
          include: ['garden', 'version'],
          ...(filter.garden ? { garden: filter.garden } : {}),
          ...(filter.tag ? { tag: filter.tag } : {}),
          ...(filter.q ? { q: filter.q } : {}),
          next: starts[starts.length - 1] ?? null,
        }),
      [store, filter, starts],
    ),
  );
  const gardenList = useLoad(useCallback(() => store.gardens.list(), [store]));
  const gardens = gardenList.data ?? [];

  const gardenName = (id: string) => gardens.find((g) => g.id === id)?.name ?? id;
  const mayChange = (p: Item) =>
    capabilities(
      me,
      gardens.find((g) => g.id === p.garden),
    ).write;
  const writable = gardens.filter((g) => capabilities(me, g).write);

  const applyFilter = (e: Event) => {
    e.preventDefault();
    setFilter({ ...draft, q: typed.trim() });
    setStarts([null]);
    setMade(null);
  };
  const turn = (to: (string | null)[]) => {
    setStarts(to);
    setMade(null);
  };

  const remove = (p: Item) =>
    deleting.run(async () => {
      try {
        await store.delete(p.id, { ifMatch: etagOf(p) });
        if (trash) {
          say(
            <>
              Moved to trash: <Quoted of={p.name} />.
            </>,
            p,
          );
        } else {
          say(
            <>
              Deleted <Quoted of={p.name} /> for good (this service keeps no trash).
            </>,
          );
        }
        if (made?.id === p.id) setMade(null);
        deleting.close();
      } catch (err) {
        if (isStatus(err, 404)) {
          say(
            <>
              <Quoted of={p.name} /> was already gone.
            </>,
          );
          deleting.close();
        } else if (isStatus(err, 412)) {
          deleting.close(
            'This plant changed since the list was read. Look at it again, then delete it if you still want to.',
          );
        } else {
          throw err;
        }
      }
      await page.reload();
    });
  // "Undo": the plant back from the trash, as it was (POST /trash/{id}/restore, under an
  // Idempotency-Key, so that a retry of a restore that was done answers the same).
  const undo = async (p: Item) => {
    try {
      const back = await store.trash.restore(p.id, { idempotencyKey: newKey() });
      say(
        <>
          Restored <Quoted of={back.name} />.
        </>,
      );
      setMade({
        ...p,
        name: back.name,
        ...(back.tag ? { tag: back.tag } : {}),
        version: versionOf(back.etag),
      });
      setMark('restored');
    } catch (err) {
      if (isStatus(err, 404)) {
        say(
          <>
            <Quoted of={p.name} /> cannot be brought back: the delete was final (this service keeps no trash,
            or it was deleted for good since).
          </>,
        );
      } else if (isStatus(err, 409) && err.code === 'plant_exists') {
        say(
          <>
            <Quoted of={p.name} /> cannot be brought back: its id {p.id} was taken by a plant made since.
          </>,
        );
      } else {
        say('');
        deleting.close(fail(err));
      }
    }
    heading.current?.focus();
    await page.reload();
  };
  const done = async (message: ComponentChildren | null) => {
    if (message) {
      say(message);
      await page.reload();
    }
  };

  return (
    <View id="plants" title="Plants" heading={heading} loading={page.loading || gardenList.loading}>
      <form class="toolbar" onSubmit={applyFilter} aria-label="Filter plants">
        <TextField
          id="search-plants"
          label="Search plants"
          type="search"
          value={typed}
          onValue={setTyped}
          maxLength={100}
          autocomplete="off"
        />
        <SelectField
          id="filter-garden"
          label="Filter by garden"
          value={draft.garden}
          onValue={(garden) => setDraft({ ...draft, garden })}
        >
          <option value="">All my gardens</option>
          <GardenOptions gardens={gardens} marked={false} />
        </SelectField>
        <TextField
          id="filter-tag"
          label="Filter by tag"
          value={draft.tag}
          onValue={(tag) => setDraft({ ...draft, tag })}
          maxLength={100}
        />
        <button type="submit">Show</button>
      </form>

      <div class="actions">
        <ExportLinks
          query={{
            ...(filter.garden ? { garden: filter.garden } : {}),
            ...(filter.tag ? { tag: filter.tag } : {}),
            ...(filter.q ? { q: filter.q } : {}),
          }}
          onError={say}
        />
        {can(me, 'plants:write') && <ImportButton garden={filter.garden || undefined} onDone={done} />}
      </div>
      {can(me, 'plants:write') && (
        <Opener
          label="New plant"
          controls="new-plant"
          form={(close) => (
            <NewPlant
              gardens={writable}
              onDone={async (plant) => {
                close();
                if (plant) {
                  setMade(plant);
                  setMark('new');
                  await done(
                    <>
                      Created <Quoted of={plant.name} /> (id {plant.id}).
                    </>,
                  );
                }
              }}
            />
          )}
        />
      )}

      <div class="status-line">
        <Status message={status} />
        {trashed && (
          <button type="button" ref={undoButton} onClick={() => undo(trashed)}>
            Undo
          </button>
        )}
      </div>
      <ErrorText error={page.error ?? gardenList.error} />
      {deleting.error && !deleting.about && <ErrorText error={deleting.error} />}

      {page.data && page.data.plants.length === 0 && !made && (
        <p>No plants here{filter.tag || filter.garden || filter.q ? ' with this filter' : ' yet'}.</p>
      )}
      {page.data && page.data.plants.length > 0 && (
        <p class="help" id="plants-position">
          Page {starts.length} · plants {(starts.length - 1) * PAGE + 1}–
          {(starts.length - 1) * PAGE + page.data.plants.length}
        </p>
      )}
      {page.data && (page.data.plants.length > 0 || made) && (
        <Table caption={`Plants, page ${starts.length}`} columns={['Name', 'Tag', 'Garden', 'Id']} actions>
          {[
            ...(made && !page.data.plants.some((p) => p.id === made.id) ? [made] : []),
            ...page.data.plants,
          ].map((p) => (
            <tr key={p.id} class={p.id === made?.id ? 'just-made' : undefined}>
              <td>
                <Name of={p.name} />
                {p.id === made?.id && <span class="tag-new"> {mark}</span>}
              </td>
              <td>{p.tag ? <Name of={p.tag} /> : '—'}</td>
              <td>
                <Name of={gardenName(p.garden)} />
              </td>
              <td>{p.id}</td>
              <td class="row-actions">
                <RowButton of={p.name} onClick={() => setHistory(p)}>
                  History
                </RowButton>
                {mayChange(p) && (
                  <>
                    <RowButton of={p.name} onClick={() => setEditing(p)}>
                      Change
                    </RowButton>
                    <DeleteButton of={p.name} onClick={() => deleting.ask(p)} />
                  </>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      <div class="actions pager">
        {starts.length > 1 && (
          <button type="button" onClick={() => turn(starts.slice(0, -1))}>
            Previous
          </button>
        )}
        {page.data?.next && (
          <button type="button" onClick={() => turn([...starts, page.data!.next])}>
            Next page
          </button>
        )}
      </div>

      {editing && (
        <ChangePlant
          plant={editing}
          onDone={async (message) => {
            setEditing(null);
            await done(message);
          }}
        />
      )}
      {history && <PlantHistory plant={history} onClose={() => setHistory(null)} />}
      {deleting.about && (
        <Confirm
          title="Delete plant"
          question={
            <>
              {trash ? (
                <>
                  Delete <Quoted of={deleting.about.name} />? It goes to its garden's trash, from where it can
                  be restored for a while.
                </>
              ) : (
                <>
                  Delete <Quoted of={deleting.about.name} /> for good? This service keeps no trash: it cannot
                  be brought back.
                </>
              )}
            </>
          }
          error={deleting.error}
          onConfirm={() => remove(deleting.about!)}
          onCancel={deleting.cancel}
        />
      )}
    </View>
  );
}

/** A plant's events, newest first, a page at a time: who did what, and what changed. */
function PlantHistory(props: { plant: Item; onClose: () => void }) {
  const { store } = useApi();
  const { plant } = props;
  const read = useCallback(
    (next: string | null) => store.plants.historyPage(plant.id, { limit: 20, next }),
    [store, plant.id],
  );
  return (
    <Dialog
      wide
      title={
        <>
          History of <Quoted of={plant.name} />
        </>
      }
      onClose={props.onClose}
    >
      <EventList
        caption={`Events of ${plant.name}, newest first`}
        read={read}
        plant={false}
        empty="No events of this plant are kept."
      />
      <div class="actions">
        <button type="button" onClick={props.onClose}>
          Close
        </button>
      </div>
    </Dialog>
  );
}

/** A plant's version from its ETag (its version, quoted: section 1). */
const versionOf = (etag: string) => Number(etag.replace(/^"|"$/g, ''));

/** The gardens as the options of a choice, by name; `marked`: the home garden says so. */
const GardenOptions = (props: { gardens: Garden[]; marked: boolean }) =>
  props.gardens.map((g) => (
    <option key={g.id} value={g.id} class="name">
      {g.name}
      {props.marked && g.home ? ' (home)' : ''}
    </option>
  ));

function NewPlant(props: { gardens: Garden[]; onDone: (made: Item | null) => void }) {
  const { store } = useApi();
  const home = props.gardens.find((g) => g.home) ?? props.gardens[0];
  const [fields, setFields] = useState({ name: '', tag: '', garden: '' });
  const garden = fields.garden || home?.id || '';

  const form = useForm(async () => {
    const plant = { name: fields.name, tag: fields.tag || null };
    const made = await store.create(plant, { idempotencyKey: newKey(), ...(garden ? { garden } : {}) });
    // Its ETag is its version, quoted (section 1): the list's rows carry the version, not the ETag.
    props.onDone({ ...made, garden, version: versionOf(made.etag) });
  });

  return (
    <FormPanel id="new-plant" title="New plant" onSubmit={form.submit}>
      <TextField
        id="new-plant-name"
        label="Name"
        focus
        value={fields.name}
        onValue={(name) => setFields({ ...fields, name })}
        required
        maxLength={200}
        autocomplete="off"
      />
      <TextField
        id="new-plant-tag"
        label="Tag"
        value={fields.tag}
        onValue={(tag) => setFields({ ...fields, tag })}
        maxLength={100}
        autocomplete="off"
        help="Optional."
      />
      <SelectField
        id="new-plant-garden"
        label="Garden"
        value={garden}
        onValue={(g) => setFields({ ...fields, garden: g })}
      >
        <GardenOptions gardens={props.gardens} marked />
      </SelectField>
      <ErrorText error={form.error} />
      <FormButtons submit="Create" onCancel={() => props.onDone(null)} />
    </FormPanel>
  );
}

/**
 * Changes a plant with If-Match of the version the list showed. When someone changed it meanwhile
 * (412), shows what it is now and lets the person apply the same change again, on that version.
 */
function ChangePlant(props: { plant: Item; onDone: (message: ComponentChildren | null) => void }) {
  const { store, fail } = useApi();
  const { plant } = props;
  const [name, setName] = useState(plant.name);
  const [tag, setTag] = useState(plant.tag ?? '');
  const [etag, setEtag] = useState(etagOf(plant));
  const [base, setBase] = useState<{ name: string; tag: string }>({ name: plant.name, tag: plant.tag ?? '' });
  const [conflict, setConflict] = useState<{ name: string; tag: string | undefined } | null>(null);

  const { submit, error, setError } = useForm(async () => {
    const patch: { name?: string; tag?: string | null } = {};
    if (name !== base.name) patch.name = name;
    if (tag !== base.tag) patch.tag = tag === '' ? null : tag;
    if (Object.keys(patch).length === 0) return props.onDone('Nothing to change.');
    try {
      const saved = await store.update(plant.id, patch, { ifMatch: etag, idempotencyKey: newKey() });
      props.onDone(
        <>
          Saved <Quoted of={saved.name} />.
        </>,
      );
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
        throw err;
      }
    }
  });

  return (
    <Dialog
      title={
        <>
          Change <Name of={plant.name} />
        </>
      }
      onClose={() => props.onDone(null)}
    >
      <form class="stack" onSubmit={submit}>
        {conflict && (
          <div role="alert" class="notice">
            <p>Someone changed this plant after you opened it. It is now:</p>
            <dl>
              <dt>Name</dt>
              <dd>
                <Name of={conflict.name} />
              </dd>
              <dt>Tag</dt>
              <dd>{conflict.tag ? <Name of={conflict.tag} /> : '(none)'}</dd>
            </dl>
            <p>Your change is still in the fields below. Apply it again to this version, or cancel.</p>
          </div>
        )}
        <TextField id="change-name" label="Name" value={name} onValue={setName} required maxLength={200} />
        <TextField
          id="change-tag"
          label="Tag"
          value={tag}
          onValue={setTag}
          maxLength={100}
          help="Empty removes the tag."
        />
        <ErrorText error={error} />
        <FormButtons
          submit={conflict ? 'Apply my change again' : 'Save'}
          onCancel={() => props.onDone(null)}
        />
      </form>
    </Dialog>
  );
}
