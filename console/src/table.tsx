import type { ComponentChildren } from 'preact';
import { useLayoutEffect, useRef } from 'preact/hooks';

/**
 * A table of rows with a caption for screen readers and a header per column; `actions` adds a last
 * column, named "Actions" for screen readers, for each row's buttons.
 *
 * On a phone's width each row is shown as a card, each cell under its column's name (styles.css):
 * so that every button stays on the screen. The roles are given explicitly, because a table whose
 * parts are displayed as blocks may lose them (set here: the markup's own are implied), and each cell gets its column's name as `data-label`
 * (set after each render, so that the views write plain rows).
 */
export function Table(props: {
  caption: ComponentChildren;
  columns: readonly string[];
  actions?: boolean;
  children: ComponentChildren;
}) {
  const table = useRef<HTMLTableElement>(null);
  useLayoutEffect(() => {
    const t = table.current;
    if (!t) return;
    t.setAttribute('role', 'table');
    for (const part of [t.tHead, ...t.tBodies]) part?.setAttribute('role', 'rowgroup');
    for (const th of t.querySelectorAll('thead tr')) th.setAttribute('role', 'row');
    for (const th of t.querySelectorAll('th')) th.setAttribute('role', 'columnheader');
    for (const row of t.tBodies[0]?.rows ?? []) {
      row.setAttribute('role', 'row');
      [...row.cells].forEach((cell, i) => {
        cell.setAttribute('role', 'cell');
        const label = props.columns[i];
        if (label) cell.dataset.label = label;
        else cell.classList.add('row-actions');
      });
    }
  });
  return (
    <div class="scroll">
      <table ref={table}>
        <caption class="visually-hidden">{props.caption}</caption>
        <thead>
          <tr>
            {props.columns.map((c) => (
              <th scope="col" key={c}>
                {c}
              </th>
            ))}
            {props.actions && (
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody>{props.children}</tbody>
      </table>
    </div>
  );
}

/**
 * A button of a row: it shows `children` ("Delete") and is named for what it does to that row
 * ("Delete Fern": `children`, then `joined` (a space, or " of "), then `of`), so that each is told
 * apart by screen readers and tests. `of` (a name from the service) always ends the name, so that
 * no text follows it for a bidi control in it to reorder. `danger` marks a destructive one;
 * `pressed`, a toggle that is on.
 */
export function RowButton(props: {
  of: string;
  joined?: string;
  onClick: () => void;
  danger?: boolean;
  pressed?: boolean;
  children: string;
}) {
  return (
    <button
      type="button"
      class={props.danger ? 'danger' : undefined}
      aria-label={`${props.children}${props.joined ?? ' '}${props.of}`}
      aria-pressed={props.pressed}
      onClick={props.onClick}
    >
      {props.children}
    </button>
  );
}

/** A row's "Delete" button, named for what it deletes ("Delete Fern"); it asks before deleting. */
export const DeleteButton = (props: { of: string; onClick: () => void }) => (
  <RowButton of={props.of} danger onClick={props.onClick}>
    Delete
  </RowButton>
);

/** "More …" under a list read a page at a time, while there is a next page. */
export function More(props: {
  list: { data: { next: string | null } | null; more: () => void };
  label: string;
}) {
  return props.list.data?.next ? (
    <div class="actions">
      <button type="button" onClick={props.list.more}>
        {props.label}
      </button>
    </div>
  ) : null;
}
