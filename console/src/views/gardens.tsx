import { can, capabilities, type Garden, ROLES, type Role } from 'plantstore/client';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { useApi } from '../api.js';
import { Options, SelectField, TextField } from '../fields.js';
import { useLoad } from '../load.js';
import { isStatus } from '../session.js';
import { RowButton, Table } from '../table.js';
import { Confirm, ErrorText, Status, useAsking, View, when } from '../ui.js';

export function GardensView() {
  const { store, me } = useApi();
  const [open, setOpen] = useState<string | null>(null);
  const [name, setName] = useState('');
  const [status, setStatus] = useState('');
  const heading = useRef<HTMLHeadingElement>(null);
  const list = useLoad(useCallback(() => store.gardens.list(), [store]));

  const create = async (e: Event) => {
    e.preventDefault();
    await list.attempt(async () => {
      const g = await store.gardens.create(name);
      setName('');
      setStatus(`Created the garden “${g.name}”.`);
      setOpen(g.id);
      await list.reload();
    });
  };

  const current = list.data?.find((g) => g.id === open) ?? null;
  const gone = async (message: string) => {
    setOpen(null);
    setStatus(message);
    await list.reload();
    heading.current?.focus();
  };

  return (
    <View id="gardens" title="Gardens" heading={heading}>
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
                {g.name}
                {g.home ? ' (home)' : ''}
              </td>
              <td>{g.role}</td>
              <td>{when(g.createdAt)}</td>
              <td class="row-actions">
                <RowButton
                  name={`Open ${g.name}`}
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

type Asked = { kind: 'delete' } | { kind: 'remove'; user: string } | { kind: 'leave' };
const ASKED = {
  delete: { title: 'Delete garden', action: 'Delete' },
  leave: { title: 'Leave garden', action: 'Leave' },
  remove: { title: 'Remove member', action: 'Remove' },
} as const;

function GardenPanel(props: {
  garden: Garden;
  onChanged: () => Promise<unknown>;
  onGone: (message: string) => Promise<void>;
}) {
  const { store, me } = useApi();
  const { garden } = props;
  const owner = capabilities(me, garden).manage;
  const [rename, setRename] = useState(garden.name);
  const [user, setUser] = useState('');
  const [role, setRole] = useState<Role>('viewer');
  const [roles, setRoles] = useState<Record<string, Role>>({});
  const confirm = useAsking<Asked>();
  const [status, setStatus] = useState('');
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);

  const members = useLoad(
    useCallback(async () => {
      const list = await store.gardens.members(garden.id);
      setRoles(Object.fromEntries(list.map((m) => [m.user, m.role])));
      return list;
    }, [store, garden.id]),
  );

  const act = (what: () => Promise<unknown>, done: string) =>
    members.attempt(async () => {
      await what();
      setStatus(done);
    });

  const doRename = async (e: Event) => {
    e.preventDefault();
    if (await act(() => store.gardens.rename(garden.id, rename), `Renamed to “${rename}”.`))
      await props.onChanged();
  };
  const share = async (who: string, r: Role) => {
    if (await act(() => store.gardens.share(garden.id, who, r), `${who} is now ${r}.`)) {
      await members.reload();
      return true;
    }
    return false;
  };
  const add = async (e: Event) => {
    e.preventDefault();
    if (await share(user.trim(), role)) setUser('');
  };
  const confirmed = (asked: Asked) =>
    confirm.run(
      async () => {
        if (asked.kind === 'delete') {
          await store.gardens.delete(garden.id);
          confirm.close();
          await props.onGone(`Deleted the garden “${garden.name}”.`);
        } else if (asked.kind === 'leave') {
          await store.gardens.unshare(garden.id, me.user);
          confirm.close();
          await props.onGone(`You left “${garden.name}”.`);
        } else {
          await store.gardens.unshare(garden.id, asked.user);
          confirm.close();
          setStatus(`Removed ${asked.user}.`);
          await members.reload();
        }
      },
      (err, sentence) =>
        isStatus(err, 409) && asked.kind === 'delete'
          ? `${sentence} Move or delete its plants first.`
          : sentence,
    );
  const question = (asked: Asked) =>
    asked.kind === 'delete'
      ? `Delete the garden “${garden.name}”? Only an empty garden can be deleted.`
      : asked.kind === 'leave'
        ? `Leave “${garden.name}”? You stop seeing its plants at once.`
        : `Remove ${asked.user} from “${garden.name}”? They stop seeing its plants at once.`;

  return (
    <section class="panel" aria-labelledby="garden-h">
      <h3 id="garden-h" ref={heading} tabIndex={-1}>
        {garden.name}
      </h3>
      <p class="help">
        Id <code>{garden.id}</code>. Your role: {garden.role}.
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
      {members.data && (
        <Table caption={`Members of ${garden.name}`} columns={['User', 'Role', 'Added']} actions>
          {members.data.map((m) => (
            <tr key={m.user}>
              <td>{m.user}</td>
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
                  <RowButton
                    name={`Save role of ${m.user}`}
                    onClick={() => share(m.user, roles[m.user] ?? m.role)}
                  >
                    Save role
                  </RowButton>
                )}
                {owner && m.user !== me.user && (
                  <RowButton
                    name={`Remove ${m.user}`}
                    danger
                    onClick={() => confirm.ask({ kind: 'remove', user: m.user })}
                  >
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
      {confirm.about && (
        <Confirm
          title={ASKED[confirm.about.kind].title}
          question={question(confirm.about)}
          action={ASKED[confirm.about.kind].action}
          error={confirm.error}
          onConfirm={() => confirmed(confirm.about!)}
          onCancel={confirm.close}
        />
      )}
    </section>
  );
}
