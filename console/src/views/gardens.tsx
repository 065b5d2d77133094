import { can, capabilities, type Garden, ROLES, type Role } from 'plantstore/client';
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { useApi } from '../api.js';
import { EventList } from '../events.js';
import { Options, SelectField, TextField } from '../fields.js';
import { useLoad } from '../load.js';
import { isStatus } from '../session.js';
import { RowButton, Table } from '../table.js';
import { Confirm, ErrorText, Loading, Name, Quoted, Status, useAsking, View, when } from '../ui.js';

export function GardensView() {
  const { store, me } = useApi();
  const [open, setOpen] = useState<string | null>(null);
  const [name, setName] = useState('');
  const [status, setStatus] = useState<ComponentChildren>('');
  const heading = useRef<HTMLHeadingElement>(null);
  const list = useLoad(useCallback(() => store.gardens.list(), [store]));

  const create = async (e: Event) => {
    e.preventDefault();
    await list.attempt(async () => {
      const g = await store.gardens.create(name);
      setName('');
      setStatus(
        <>
          Created the garden <Quoted of={g.name} />.
        </>,
      );
      setOpen(g.id);
      await list.reload();
    });
  };

  const current = list.data?.find((g) => g.id === open) ?? null;
  const gone = async (message: ComponentChildren) => {
    setOpen(null);
    setStatus(message);
    await list.reload();
    heading.current?.focus();
  };

  return (
    <View id="gardens" title="Gardens" heading={heading} loading={list.loading}>
      {can(me, 'plants:write') && (
        <form class="toolbar" onSubmit={create} aria-label="New garden">
          <TextField
            id="new-garden-name"
            label="New garden's name"
            value={name}
            onValue={setName}
            required
            maxLength={100}
            autocomplete="off"
          />
          <button type="submit" class="primary">
            Create garden
          </button>
        </form>
      )}
      <Status message={status} />
      <ErrorText error={list.error} />
      {list.data && (
        <Table caption="Your gardens" columns={['Name', 'Your role', 'Created']} actions>
          {list.data.map((g) => (
            <tr key={g.id}>
              <td>
                <Name of={g.name} />
                {g.home ? ' (home)' : ''}
              </td>
              <td>{g.role}</td>
              <td>{when(g.createdAt)}</td>
              <td class="row-actions">
                <RowButton
                  of={g.name}
                  pressed={open === g.id}
                  onClick={() => setOpen(open === g.id ? null : g.id)}
                >
                  Open
                </RowButton>
              </td>
            </tr>
          ))}
        </Table>
      )}
      {current && <GardenPanel key={current.id} garden={current} onChanged={list.reload} onGone={gone} />}
    </View>
  );
}

type Asked =
  | { kind: 'delete' }
  | { kind: 'remove'; user: string }
  | { kind: 'leave' }
  | { kind: 'role'; user: string; from: Role; to: Role };
const ASKED = {
  role: { title: 'Change role', action: 'Change role' },
  delete: { title: 'Delete garden', action: 'Delete' },
  leave: { title: 'Leave garden', action: 'Leave' },
  remove: { title: 'Remove member', action: 'Remove' },
} as const;

function GardenPanel(props: {
  garden: Garden;
  onChanged: () => Promise<unknown>;
  onGone: (message: ComponentChildren) => Promise<void>;
}) {
  const { store, me } = useApi();
  const { garden } = props;
  const owner = capabilities(me, garden).manage;
  const [rename, setRename] = useState(garden.name);
  const [user, setUser] = useState('');
  const [role, setRole] = useState<Role>('viewer');
  const [roles, setRoles] = useState<Record<string, Role>>({});
  const confirm = useAsking<Asked>();
  const [status, setStatus] = useState<ComponentChildren>('');
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);
  // The activity is read again after each change made here (its key), so that it shows it.
  const [changes, setChanges] = useState(0);
  const readActivity = useCallback(
    (next: string | null) => store.gardens.activityPage(garden.id, { limit: 20, next }),
    [store, garden.id],
  );

  const members = useLoad(
    useCallback(async () => {
      const list = await store.gardens.members(garden.id);
      setRoles(Object.fromEntries(list.map((m) => [m.user, m.role])));
      return list;
    }, [store, garden.id]),
  );

  const act = (what: () => Promise<unknown>, done: ComponentChildren) =>
    members.attempt(async () => {
      await what();
      setStatus(done);
      setChanges((n) => n + 1);
    });

  const doRename = async (e: Event) => {
    e.preventDefault();
    const renamed = (
      <>
        Renamed to <Quoted of={rename} />.
      </>
    );
    if (await act(() => store.gardens.rename(garden.id, rename), renamed)) await props.onChanged();
  };
  const share = async (who: string, r: Role) => {
    const now = (
      <>
        <Name of={who} /> is now {r}.
      </>
    );
    if (await act(() => store.gardens.share(garden.id, who, r), now)) {
      await members.reload();
      return true;
    }
    return false;
  };
  // "Add member" adds; it never changes the role of someone already a member without asking
  // (PUT would silently turn an editor into a viewer). The members are read afresh to decide.
  const add = async (e: Event) => {
    e.preventDefault();
    const who = user.trim();
    let current: Role | undefined;
    const read = await members.attempt(async () => {
      current = (await store.gardens.members(garden.id)).find((m) => m.user === who)?.role;
    });
    if (!read) return;
    if (current === undefined) {
      if (await share(who, role)) setUser('');
    } else if (current === role) {
      setStatus(
        <>
          <Name of={who} /> is already {article(current)} {current} of <Quoted of={garden.name} />: nothing
          changed.
        </>,
      );
    } else {
      confirm.ask({ kind: 'role', user: who, from: current, to: role });
    }
  };
  const confirmed = (asked: Asked) =>
    confirm.run(
      async () => {
        if (asked.kind === 'delete') {
          await store.gardens.delete(garden.id);
          confirm.close();
          await props.onGone(
            <>
              Deleted the garden <Quoted of={garden.name} />.
            </>,
          );
        } else if (asked.kind === 'leave') {
          await store.gardens.unshare(garden.id, me.user);
          confirm.close();
          await props.onGone(
            <>
              You left <Quoted of={garden.name} />.
            </>,
          );
        } else if (asked.kind === 'role') {
          await store.gardens.share(garden.id, asked.user, asked.to);
          confirm.close();
          setUser('');
          setStatus(
            <>
              <Name of={asked.user} /> is now {article(asked.to)} {asked.to}.
            </>,
          );
          setChanges((n) => n + 1);
          await members.reload();
        } else {
          await store.gardens.unshare(garden.id, asked.user);
          confirm.close();
          setStatus(
            <>
              Removed <Name of={asked.user} />.
            </>,
          );
          setChanges((n) => n + 1);
          await members.reload();
        }
      },
      // The service's sentence ("still has plants: delete them first") said once, as what to do.
      (err, sentence) =>
        isStatus(err, 409) && err.code === 'garden_not_empty'
          ? 'This garden still has plants. Move them to another garden or delete them, then delete the garden.'
          : sentence,
    );
  const name = <Quoted of={garden.name} />;
  const question = (asked: Asked) =>
    asked.kind === 'delete' ? (
      <>Delete the garden {name}? Only an empty garden can be deleted.</>
    ) : asked.kind === 'leave' ? (
      <>Leave {name}? You stop seeing its plants at once.</>
    ) : asked.kind === 'role' ? (
      <>
        <Name of={asked.user} /> is already {article(asked.from)} {asked.from} of {name}. Change their role to{' '}
        {asked.to}?
      </>
    ) : (
      <>
        Remove <Name of={asked.user} /> from {name}? They stop seeing its plants at once.
      </>
    );

  return (
    <section class="panel" aria-labelledby="garden-h">
      <h3 id="garden-h" ref={heading} tabIndex={-1}>
        <Name of={garden.name} />
      </h3>
      <p class="help">
        Id <code class="id">{garden.id}</code>. Your role: {garden.role}.
      </p>
      <Status message={status} />
      <ErrorText error={members.error} />
      {owner && (
        <form class="toolbar" onSubmit={doRename} aria-label="Rename">
          <TextField
            id="rename-garden"
            label="Garden name"
            value={rename}
            onValue={setRename}
            required
            maxLength={100}
          />
          <button type="submit">Rename</button>
        </form>
      )}

      <h4>Members</h4>
      <Loading on={members.loading} />
      {members.data && (
        <Table caption={`Members of ${garden.name}`} columns={['User', 'Role', 'Added']} actions>
          {members.data.map((m) => (
            <tr key={m.user}>
              <td>
                <Name of={m.user} />
              </td>
              <td>
                {owner ? (
                  <select
                    aria-label={`Role of ${m.user}`}
                    value={roles[m.user] ?? m.role}
                    onChange={(e) => setRoles({ ...roles, [m.user]: e.currentTarget.value as Role })}
                  >
                    <Options values={ROLES} />
                  </select>
                ) : (
                  m.role
                )}
              </td>
              <td>{when(m.addedAt)}</td>
              <td class="row-actions">
                {owner && (
                  <RowButton of={m.user} joined=" of " onClick={() => share(m.user, roles[m.user] ?? m.role)}>
                    Save role
                  </RowButton>
                )}
                {owner && m.user !== me.user && (
                  <RowButton of={m.user} danger onClick={() => confirm.ask({ kind: 'remove', user: m.user })}>
                    Remove
                  </RowButton>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      {owner && (
        <form class="toolbar" onSubmit={add} aria-label="Add a member">
          <TextField
            id="member-user"
            label="User"
            value={user}
            onValue={setUser}
            required
            maxLength={200}
            autocomplete="off"
          />
          <SelectField id="member-role" label="Role" value={role} onValue={setRole}>
            <Options values={ROLES} />
          </SelectField>
          <button type="submit">Add member</button>
        </form>
      )}
      <div class="actions">
        {!garden.home && members.data?.some((m) => m.user === me.user) && (
          <button type="button" onClick={() => confirm.ask({ kind: 'leave' })}>
            Leave garden
          </button>
        )}
        {owner && !garden.home && (
          <button type="button" class="danger" onClick={() => confirm.ask({ kind: 'delete' })}>
            Delete garden
          </button>
        )}
      </div>
      <h4>Activity</h4>
      <EventList
        key={changes}
        caption={`Activity of ${garden.name}, newest first`}
        read={readActivity}
        plant
        empty="No activity of this garden is kept."
      />
      {confirm.about && (
        <Confirm
          title={ASKED[confirm.about.kind].title}
          question={question(confirm.about)}
          action={ASKED[confirm.about.kind].action}
          error={confirm.error}
          onConfirm={() => confirmed(confirm.about!)}
          onCancel={confirm.cancel}
        />
      )}
    </section>
  );
}

/** "an" before "editor" and "owner", "a" before "viewer". */
const article = (role: Role) => (role === 'viewer' ? 'a' : 'an');
