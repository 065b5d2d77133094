import type { Garden, Member, Role } from 'plantstore/client';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { can, useApi } from '../api.js';
import { isStatus } from '../session.js';
import { Confirm, ErrorText, Status, when } from '../ui.js';

const ROLES: Role[] = ['viewer', 'editor', 'owner'];

export function GardensView() {
  const { store, me, fail } = useApi();
  const [gardens, setGardens] = useState<Garden[] | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const [name, setName] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState('');
  const heading = useRef<HTMLHeadingElement>(null);

  const load = useCallback(async () => {
    try {
      setGardens(await store.gardens.list());
      setError(null);
    } catch (err) {
      setError(fail(err));
    }
  }, [store, fail]);
  useEffect(() => {
    void load();
  }, [load]);

  const create = async (e: Event) => {
    e.preventDefault();
    try {
      const g = await store.gardens.create(name);
      setName('');
      setStatus(`Created the garden “${g.name}”.`);
      setOpen(g.id);
      await load();
    } catch (err) {
      setError(fail(err));
    }
  };

  const current = gardens?.find((g) => g.id === open) ?? null;
  const gone = async (message: string) => {
    setOpen(null);
    setStatus(message);
    await load();
    heading.current?.focus();
  };

  return (
    <section aria-labelledby="gardens-h">
      <h2 id="gardens-h" ref={heading} tabIndex={-1}>
        Gardens
      </h2>
      {can(me, 'plants:write') && (
        <form class="toolbar" onSubmit={create} aria-label="New garden">
          <div class="field">
            <label for="new-garden-name">New garden's name</label>
            <input
              id="new-garden-name"
              value={name}
              onInput={(e) => setName(e.currentTarget.value)}
              required
              maxLength={100}
              autocomplete="off"
            />
          </div>
          <button type="submit" class="primary">
            Create garden
          </button>
        </form>
      )}
      <Status message={status} />
      <ErrorText error={error} />
      {gardens && (
        <table>
          <caption class="visually-hidden">Your gardens</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Your role</th>
              <th scope="col">Created</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {gardens.map((g) => (
              <tr key={g.id}>
                <td>
                  {g.name}
                  {g.home ? ' (home)' : ''}
                </td>
                <td>{g.role}</td>
                <td>{when(g.createdAt)}</td>
                <td class="row-actions">
                  <button
                    type="button"
                    aria-label={`Open ${g.name}`}
                    aria-pressed={open === g.id}
                    onClick={() => setOpen(open === g.id ? null : g.id)}
                  >
                    Open
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {current && <GardenPanel key={current.id} garden={current} onChanged={load} onGone={gone} />}
    </section>
  );
}

function GardenPanel(props: {
  garden: Garden;
  onChanged: () => Promise<void>;
  onGone: (message: string) => Promise<void>;
}) {
  const { store, me, fail } = useApi();
  const { garden } = props;
  const owner = garden.role === 'owner' && can(me, 'plants:write');
  const [members, setMembers] = useState<Member[] | null>(null);
  const [rename, setRename] = useState(garden.name);
  const [user, setUser] = useState('');
  const [role, setRole] = useState<Role>('viewer');
  const [roles, setRoles] = useState<Record<string, Role>>({});
  const [confirm, setConfirm] = useState<
    null | { kind: 'delete' } | { kind: 'remove'; user: string } | { kind: 'leave' }
  >(null);
  const [error, setError] = useState<string | null>(null);
  const [confirmError, setConfirmError] = useState<string | null>(null);
  const [status, setStatus] = useState('');
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);

  const loadMembers = useCallback(async () => {
    try {
      const list = await store.gardens.members(garden.id);
      setMembers(list);
      setRoles(Object.fromEntries(list.map((m) => [m.user, m.role])));
    } catch (err) {
      setError(fail(err));
    }
  }, [store, fail, garden.id]);
  useEffect(() => {
    void loadMembers();
  }, [loadMembers]);

  const act = async (what: () => Promise<unknown>, done: string) => {
    try {
      await what();
      setError(null);
      setStatus(done);
      return true;
    } catch (err) {
      setError(fail(err));
      return false;
    }
  };

  const doRename = async (e: Event) => {
    e.preventDefault();
    if (await act(() => store.gardens.rename(garden.id, rename), `Renamed to “${rename}”.`))
      await props.onChanged();
  };
  const add = async (e: Event) => {
    e.preventDefault();
    const who = user.trim();
    if (await act(() => store.gardens.share(garden.id, who, role), `${who} is now ${role}.`)) {
      setUser('');
      await loadMembers();
    }
  };
  const confirmed = async () => {
    if (!confirm) return;
    try {
      if (confirm.kind === 'delete') {
        await store.gardens.delete(garden.id);
        setConfirm(null);
        await props.onGone(`Deleted the garden “${garden.name}”.`);
      } else if (confirm.kind === 'leave') {
        await store.gardens.unshare(garden.id, me.user);
        setConfirm(null);
        await props.onGone(`You left “${garden.name}”.`);
      } else {
        await store.gardens.unshare(garden.id, confirm.user);
        setConfirm(null);
        setStatus(`Removed ${confirm.user}.`);
        await loadMembers();
      }
    } catch (err) {
      setConfirmError(
        isStatus(err, 409) && confirm.kind === 'delete'
          ? `${fail(err)} Move or delete its plants first.`
          : fail(err),
      );
    }
  };

  return (
    <section class="panel" aria-labelledby="garden-h">
      <h3 id="garden-h" ref={heading} tabIndex={-1}>
        {garden.name}
      </h3>
      <p class="help">
        Id <code>{garden.id}</code>. Your role: {garden.role}.
      </p>
      <Status message={status} />
      <ErrorText error={error} />
      {owner && (
        <form class="toolbar" onSubmit={doRename} aria-label="Rename">
          <div class="field">
            <label for="rename-garden">Garden name</label>
            <input
              id="rename-garden"
              value={rename}
              onInput={(e) => setRename(e.currentTarget.value)}
              required
              maxLength={100}
            />
          </div>
          <button type="submit">Rename</button>
        </form>
      )}

      <h4>Members</h4>
      {members && (
        <table>
          <caption class="visually-hidden">Members of {garden.name}</caption>
          <thead>
            <tr>
              <th scope="col">User</th>
              <th scope="col">Role</th>
              <th scope="col">Added</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {members.map((m) => (
              <tr key={m.user}>
                <td>{m.user}</td>
                <td>
                  {owner ? (
                    <select
                      aria-label={`Role of ${m.user}`}
                      value={roles[m.user] ?? m.role}
                      onChange={(e) => setRoles({ ...roles, [m.user]: e.currentTarget.value as Role })}
                    >
                      {ROLES.map((r) => (
                        <option key={r} value={r}>
                          {r}
                        </option>
                      ))}
                    </select>
                  ) : (
                    m.role
                  )}
                </td>
                <td>{when(m.addedAt)}</td>
                <td class="row-actions">
                  {owner && (
                    <button
                      type="button"
                      aria-label={`Save role of ${m.user}`}
                      onClick={async () => {
                        const r = roles[m.user] ?? m.role;
                        if (
                          await act(() => store.gardens.share(garden.id, m.user, r), `${m.user} is now ${r}.`)
                        ) {
                          await loadMembers();
                        }
                      }}
                    >
                      Save role
                    </button>
                  )}
                  {owner && m.user !== me.user && (
                    <button
                      type="button"
                      class="danger"
                      aria-label={`Remove ${m.user}`}
                      onClick={() => {
                        setConfirmError(null);
                        setConfirm({ kind: 'remove', user: m.user });
                      }}
                    >
                      Remove
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {owner && (
        <form class="toolbar" onSubmit={add} aria-label="Add a member">
          <div class="field">
            <label for="member-user">User</label>
            <input
              id="member-user"
              value={user}
              onInput={(e) => setUser(e.currentTarget.value)}
              required
              maxLength={200}
              autocomplete="off"
            />
          </div>
          <div class="field">
            <label for="member-role">Role</label>
            <select id="member-role" value={role} onChange={(e) => setRole(e.currentTarget.value as Role)}>
              {ROLES.map((r) => (
                <option key={r} value={r}>
                  {r}
                </option>
              ))}
            </select>
          </div>
          <button type="submit">Add member</button>
        </form>
      )}
      <div class="actions">
        {!garden.home && members?.some((m) => m.user === me.user) && (
          <button
            type="button"
            onClick={() => {
              setConfirmError(null);
              setConfirm({ kind: 'leave' });
            }}
          >
            Leave garden
          </button>
        )}
        {owner && !garden.home && (
          <button
            type="button"
            class="danger"
            onClick={() => {
              setConfirmError(null);
              setConfirm({ kind: 'delete' });
            }}
          >
            Delete garden
          </button>
        )}
      </div>
      {confirm && (
        <Confirm
          title={
            confirm.kind === 'delete'
              ? 'Delete garden'
              : confirm.kind === 'leave'
                ? 'Leave garden'
                : 'Remove member'
          }
          question={
            confirm.kind === 'delete'
              ? `Delete the garden “${garden.name}”? Only an empty garden can be deleted.`
              : confirm.kind === 'leave'
                ? `Leave “${garden.name}”? You stop seeing its plants at once.`
                : `Remove ${confirm.user} from “${garden.name}”? They stop seeing its plants at once.`
          }
          action={confirm.kind === 'delete' ? 'Delete' : confirm.kind === 'leave' ? 'Leave' : 'Remove'}
          error={confirmError}
          onConfirm={confirmed}
          onCancel={() => setConfirm(null)}
        />
      )}
    </section>
  );
}
