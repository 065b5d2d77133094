import type { PlantEvent } from 'plantstore/client';
import { useEffect, useState } from 'preact/hooks';
import { useApi } from '../api.js';
import { describe, isStatus } from '../session.js';
import { Table } from '../table.js';
import { View, when } from '../ui.js';

const KEEP = 200;
// This view shows plants' changes; a garden's membership changes (member.*) are left out of it.
type PlantChange = Extract<PlantEvent, { type: `plant.${string}` }>;
const isPlantChange = (e: PlantEvent): e is PlantChange => e.type.startsWith('plant.');
const VERBS: Record<PlantChange['type'], string> = {
  'plant.created': 'created',
  'plant.updated': 'changed',
  'plant.deleted': 'deleted',
};
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
  const [events, setEvents] = useState<PlantChange[]>([]);
  const [state, setState] = useState('Connecting…');
  const [announce, setAnnounce] = useState('');
  const [error, setError] = useState<string | null>(null);

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
            if (!isPlantChange(e)) continue;
            setEvents((list) => [e, ...list].slice(0, KEEP));
            setAnnounce(`Plant ${VERBS[e.type]}: ${e.data.name}`);
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
    <View id="live" title="Live">
      <p class="help">{state}</p>
      {error && <p class="error">{error}</p>}
      <p role="status" aria-live="polite" class="visually-hidden">
        {announce}
      </p>
      {events.length === 0 ? (
        <p>No events yet. Create, change or delete a plant to see one.</p>
      ) : (
        <Table caption="Events, newest first" columns={['Time', 'Event', 'Plant', 'Tag', 'Id', 'Garden']}>
          {events.map((e) => (
            <tr key={e.id}>
              <td>{when(e.timestamp)}</td>
              <td>{e.type}</td>
              <td>
                {e.data.name}
                {e.type === 'plant.updated' && e.data.previous?.name !== undefined
                  ? ` (was ${e.data.previous.name})`
                  : ''}
              </td>
              <td>{e.data.tag ?? '—'}</td>
              <td>{e.data.id}</td>
              <td>{(e.data as { garden?: string }).garden ?? '—'}</td>
            </tr>
          ))}
        </Table>
      )}
    </View>
  );
}
