import type { EventPage, PlantEvent } from 'plantstore/client';
import type { ComponentChildren } from 'preact';
import { useCallback } from 'preact/hooks';
import { usePages } from './load.js';
import { More, Table } from './table.js';
import { ErrorText, Loading, Name, Quoted, when } from './ui.js';

/**
 * An event as the console reads it, whatever its type: a type this console does not know yet is
 * still shown (by its type), never dropped.
 */
export interface AnyEvent {
  id: string;
  type: string;
  timestamp: string;
  actor: string | null;
  data: {
    id?: number;
    name?: string;
    tag?: string | null;
    garden?: string;
    user?: string;
    role?: string;
    /** plant.updated: the changed fields' former values; member.changed: the former role. */
    previous?: Record<string, string | null> | string;
  };
}
export const loose = (e: PlantEvent): AnyEvent => e as unknown as AnyEvent;

/** What happened, in words ("Changed", "Member added"); the type itself for one not known here. */
const WHAT: Record<string, string> = {
  'plant.created': 'Created',
  'plant.updated': 'Changed',
  'plant.deleted': 'Deleted',
  'plant.restored': 'Restored',
  'plant.purged': 'Deleted for good',
  'member.added': 'Member added',
  'member.changed': 'Role changed',
  'member.removed': 'Member removed',
};
export const what = (e: AnyEvent): string =>
  e.type === 'member.removed' && e.actor === e.data.user ? 'Left' : (WHAT[e.type] ?? e.type);

/** Who caused it: the user, or the service itself (its own purge of expired trash). */
export const Who = ({ e }: { e: AnyEvent }) =>
  e.actor === null ? <em>the service</em> : <Name of={e.actor} />;

const FIELDS: Record<string, string> = { name: 'Name', tag: 'Tag', garden: 'Garden' };
const value = (v: string | null | undefined) =>
  v === null || v === undefined ? '(none)' : <Quoted of={v} />;

/**
 * What changed, in words: for a change, each field from its former to its new value ("Name from
 * “Fern” to “Boston fern”"); for a membership, the user and the role (and the former role).
 * `plant`: say which plant (activity lists many; a plant's history only its own).
 */
export function Changes({ e, plant }: { e: AnyEvent; plant: boolean }) {
  const d = e.data;
  const parts: ComponentChildren[] = [];
  if (e.type.startsWith('member.')) {
    parts.push(
      <>
        <Name of={d.user ?? '?'} />{' '}
        {e.type === 'member.changed' && typeof d.previous === 'string'
          ? `from ${d.previous} to ${d.role}`
          : e.type === 'member.removed'
            ? `(was ${d.role})`
            : `as ${d.role}`}
      </>,
    );
  } else {
    if (plant) parts.push(d.name === undefined ? `Plant ${d.id}` : <Quoted of={d.name} />);
    if (e.type === 'plant.updated' && d.previous && typeof d.previous === 'object') {
      for (const [field, was] of Object.entries(d.previous)) {
        const now = (d as Record<string, string | null | undefined>)[field];
        parts.push(
          <>
            {FIELDS[field] ?? field} from {value(was)} to {value(now)}
          </>,
        );
      }
    } else if (e.type === 'plant.created' || e.type === 'plant.restored') {
      if (!plant && d.name !== undefined)
        parts.push(
          <>
            Name <Quoted of={d.name} />
          </>,
        );
      if (d.tag) parts.push(<>Tag {value(d.tag)}</>);
    }
  }
  return (
    <ul class="changes">
      {parts.map((p, i) => (
        <li key={i}>{p}</li>
      ))}
    </ul>
  );
}

/**
 * Events read a page at a time, newest first, as a table (when, who, what, what changed), with
 * "Older events" while there are more. `read(next)` reads a page (null: the first).
 */
export function EventList(props: {
  caption: string;
  read: (next: string | null) => Promise<EventPage>;
  plant: boolean;
  empty: string;
}) {
  const { read } = props;
  const list = usePages<AnyEvent>(
    useCallback(
      async (next: string | null) => {
        const page = await read(next);
        return { items: page.events.map(loose), next: page.next };
      },
      [read],
    ),
  );
  return (
    <div aria-busy={list.loading ? 'true' : undefined}>
      <Loading on={list.loading} />
      <ErrorText error={list.error} />
      {list.data && list.data.items.length === 0 && <p>{props.empty}</p>}
      {list.data && list.data.items.length > 0 && (
        <Table caption={props.caption} columns={['When', 'Who', 'What', props.plant ? 'Details' : 'Changes']}>
          {list.data.items.map((e) => (
            <tr key={e.id}>
              <td>{when(e.timestamp)}</td>
              <td>
                <Who e={e} />
              </td>
              <td>{what(e)}</td>
              <td>
                <Changes e={e} plant={props.plant} />
              </td>
            </tr>
          ))}
        </Table>
      )}
      <More list={list} label="Older events" />
    </div>
  );
}
