import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { useApi } from '../api.js';
import { type AnyEvent, Changes, loose, Who, what } from '../events.js';
import { useLoad } from '../load.js';
import { describe, isStatus } from '../session.js';
import { Table } from '../table.js';
import { Name, Quoted, View, when } from '../ui.js';

const KEEP = 200;

/** What a screen reader hears of a new event: "Plant created: “Fern”", "Member added: bob". */
function announcement(e: AnyEvent): ComponentChildren {
  const d = e.data;
  if (e.type.startsWith('member.'))
    return (
      <>
        {what(e)}: <Name of={d.user ?? ''} />, {d.role}
      </>
    );
  if (d.name === undefined) return `${what(e)}: plant ${d.id}`;
  return (
    <>
      Plant {what(e).toLowerCase()}: <Quoted of={d.name} />
    </>
  );
}
const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    });
  });

/**
 * The live stream (GET /events, read with fetch by the client: the token in the Authorization
 * header, never in the address). After a lost connection it resumes with Last-Event-ID, missing
 * nothing still kept. Each new event is announced through a polite live region.
 */
export function LiveView() {
  const { store, fail } = useApi();
  const [events, setEvents] = useState<AnyEvent[]>([]);
  const [state, setState] = useState('Connecting…');
  const [announce, setAnnounce] = useState<ComponentChildren>('');
  const [error, setError] = useState<string | null>(null);
  const [open, setOpen] = useState(false);
  // The caller's gardens, to name each event's garden (an event carries only its id).
  const gardens = useLoad(useCallback(() => store.gardens.list(), [store]));
  const gardenName = (id: string) => gardens.data?.find((g) => g.id === id)?.name;
  // A garden made (or shared with the caller) since they were read: read them again, once for it.
  const asked = useRef(new Set<string>());
  const { reload } = gardens;
  useEffect(() => {
    const unknown = events
      .map((e) => e.data.garden)
      .filter((g): g is string => !!g && !asked.current.has(g) && !gardens.data?.some((x) => x.id === g));
    if (gardens.data && unknown.length > 0) {
      for (const g of unknown) asked.current.add(g);
      void reload();
    }
  }, [events, gardens.data, reload]);

  useEffect(() => {
    const stop = new AbortController();
    let last: string | undefined;
    void (async () => {
      for (let failures = 0; !stop.signal.aborted; ) {
        try {
          for await (const e of store.events({
            ...(last ? { lastEventId: last } : {}),
            signal: stop.signal,
            onOpen: () => {
              setOpen(true);
              setState(
                last
                  ? 'Connected again; nothing was missed.'
                  : 'Connected: new events appear here as they happen.',
              );
              setError(null);
            },
          })) {
            failures = 0;
            last = e.id;
            const event = loose(e);
            setEvents((list) => [event, ...list].slice(0, KEEP));
            setAnnounce(announcement(event));
          }
        } catch (err) {
          if (stop.signal.aborted) return;
          if (isStatus(err, 401) || isStatus(err, 403)) {
            setError(fail(err));
            setState('Stopped.');
            return;
          }
          if (isStatus(err, 410)) {
            // The last event seen is no longer kept: start again from now, and say so.
            last = undefined;
            setError('Events were missed while disconnected for too long (they are no longer kept).');
          } else {
            setError(`Connection lost: ${describe(err)} Trying again…`);
          }
          setState('Reconnecting…');
          await sleep(Math.min(30_000, 1000 * 2 ** Math.min(failures++, 5)), stop.signal);
        }
      }
    })();
    return () => stop.abort();
  }, [store, fail]);

  return (
    <View id="live" title="Live" loading={!open && !error}>
      <p class="help">{state}</p>
      {error && <p class="error">{error}</p>}
      <p role="status" aria-live="polite" class="visually-hidden">
        {announce}
      </p>
      {events.length === 0 ? (
        <p>No events yet. Create, change or delete a plant, or add a member to a garden, to see one.</p>
      ) : (
        <Table
          caption="Events, newest first"
          columns={['Time', 'Event', 'By', 'Plant or member', 'Details', 'Garden']}
        >
          {events.map((e) => (
            <tr key={e.id}>
              <td>{when(e.timestamp)}</td>
              <td>{e.type}</td>
              <td>
                <Who e={e} />
              </td>
              <td>
                {e.data.user !== undefined ? (
                  <Name of={e.data.user} />
                ) : e.data.name !== undefined ? (
                  <Name of={e.data.name} />
                ) : (
                  `Plant ${e.data.id}`
                )}
              </td>
              <td>
                <LiveDetails e={e} />
              </td>
              <td>
                <GardenCell id={e.data.garden} name={gardenName} />
              </td>
            </tr>
          ))}
        </Table>
      )}
    </View>
  );
}

/**
 * What the Live view says of an event besides whom it is about: a member's role (and former role);
 * a plant's id, tag, and what a change changed.
 */
function LiveDetails({ e }: { e: AnyEvent }) {
  if (e.type.startsWith('member.'))
    return (
      <>
        {e.type === 'member.changed' && typeof e.data.previous === 'string'
          ? `${e.data.role}, was ${e.data.previous}`
          : e.type === 'member.removed'
            ? `was ${e.data.role}`
            : e.data.role}
      </>
    );
  return (
    <>
      Id {e.data.id}
      {e.type === 'plant.updated' ? (
        <Changes e={e} plant={false} />
      ) : e.data.tag ? (
        <>
          , tag <Quoted of={e.data.tag} />
        </>
      ) : null}
    </>
  );
}

/** An event's garden by its name (the id beside it, small), or its id when the caller no longer has it. */
function GardenCell(props: { id: string | undefined; name: (id: string) => string | undefined }) {
  if (!props.id) return <>—</>;
  const name = props.name(props.id);
  return name === undefined ? (
    <code class="id">{props.id}</code>
  ) : (
    <>
      <Name of={name} />{' '}
      <span class="help oneline" title={props.id}>
        {props.id}
      </span>
    </>
  );
}
