import { can, type TrashedPlant } from 'plantstore/client';
import type { ComponentChildren } from 'preact';
import { useCallback, useRef, useState } from 'preact/hooks';
import { useApi } from '../api.js';
import { useLoad, usePages } from '../load.js';
import { isStatus, newKey } from '../session.js';
import { More, RowButton, Table } from '../table.js';
import { Confirm, ErrorText, Name, Quoted, Status, useAsking, View, when } from '../ui.js';

/**
 * The trash (GET /trash): the deleted plants of the gardens where the person may restore (editor
 * or owner; an administrator: all), newest deletion first, a page at a time. Each may be restored,
 * or deleted for good after a confirmation.
 */
export function TrashView() {
  const { store, me, fail } = useApi();
  const [status, setStatus] = useState<ComponentChildren>('');
  const [error, setError] = useState<string | null>(null);
  const purging = useAsking<TrashedPlant>();
  const heading = useRef<HTMLHeadingElement>(null);
  const write = can(me, 'plants:write');
  const list = usePages<TrashedPlant>(
    useCallback(
      async (next: string | null) => {
        const page = await store.trash.page({ limit: 20, next });
        return { items: page.plants, next: page.next };
      },
      [store],
    ),
  );
  const gardens = useLoad(useCallback(() => store.gardens.list(), [store]));
  const gardenName = (id: string) => gardens.data?.find((g) => g.id === id)?.name ?? id;

  // A plant no longer in the trash leaves the list; the focus, which was on its row, goes to the heading.
  const gone = (id: number, message: ComponentChildren) => {
    list.setData((d) => d && { ...d, items: d.items.filter((t) => t.id !== id) });
    setStatus(message);
    heading.current?.focus();
  };

  const restore = async (t: TrashedPlant) => {
    setError(null);
    try {
      await store.trash.restore(t.id, { idempotencyKey: newKey() });
      gone(
        t.id,
        <>
          Restored <Quoted of={t.name} /> to <Quoted of={gardenName(t.garden)} />.
        </>,
      );
    } catch (err) {
      if (isStatus(err, 409) && err.code === 'plant_exists') {
        setError(
          `It cannot be restored: its id ${t.id} was taken by a plant made since. It stays in the trash.`,
        );
      } else if (isStatus(err, 404)) {
        gone(t.id, notThere(t));
      } else {
        setError(fail(err));
      }
    }
  };

  const purge = (t: TrashedPlant) =>
    purging.run(async () => {
      try {
        await store.trash.purge(t.id);
      } catch (err) {
        if (!isStatus(err, 404)) throw err;
        purging.close();
        return gone(t.id, notThere(t));
      }
      purging.close();
      gone(
        t.id,
        <>
          Deleted <Quoted of={t.name} /> forever.
        </>,
      );
    });

  const items = list.data?.items ?? [];
  return (
    <View id="trash" title="Trash" heading={heading} loading={list.loading}>
      <p class="help">
        Deleted plants of the gardens where you are an editor or owner wait here until they are erased for
        good. Restore one to put it back in its garden as it was.
      </p>
      <Status message={status} />
      <ErrorText error={error ?? list.error ?? gardens.error} />
      {purging.error && !purging.about && <ErrorText error={purging.error} />}
      {list.data && items.length === 0 && <p>The trash is empty.</p>}
      {items.length > 0 && (
        <Table
          caption="Deleted plants, newest deletion first"
          columns={['Name', 'Tag', 'Garden', 'Deleted', 'Deleted by', 'Kept until']}
          actions={write}
        >
          {items.map((t) => (
            <tr key={t.id}>
              <td>
                <Name of={t.name} />
              </td>
              <td>{t.tag ? <Name of={t.tag} /> : '—'}</td>
              <td>
                <Name of={gardenName(t.garden)} />
              </td>
              <td>{when(t.deletedAt)}</td>
              <td>{t.deletedBy === null ? <em>the service</em> : <Name of={t.deletedBy} />}</td>
              <td>{when(t.purgeAt)}</td>
              {write && (
                <td class="row-actions">
                  <RowButton of={t.name} onClick={() => restore(t)}>
                    Restore
                  </RowButton>
                  <RowButton of={t.name} danger onClick={() => purging.ask(t)}>
                    Delete forever
                  </RowButton>
                </td>
              )}
            </tr>
          ))}
        </Table>
      )}
      <More list={list} label="More deleted plants" />
      {purging.about && (
        <Confirm
          title="Delete forever"
          question={
            <>
              Delete <Quoted of={purging.about.name} /> forever? It cannot be restored after this.
            </>
          }
          action="Delete forever"
          error={purging.error}
          onConfirm={() => purge(purging.about!)}
          onCancel={purging.cancel}
        />
      )}
    </View>
  );
}

const notThere = (t: TrashedPlant) => (
  <>
    <Quoted of={t.name} /> is no longer in the trash: it was restored or deleted for good meanwhile.
  </>
);
