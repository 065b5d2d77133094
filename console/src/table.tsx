import type { ComponentChildren } from 'preact';

/**
 * A table of rows with a caption for screen readers and a header per column; `actions` adds a last
 * column, named "Actions" for screen readers, for each row's buttons.
 */
export function Table(props: {
  caption: ComponentChildren;
  columns: readonly string[];
  actions?: boolean;
  children: ComponentChildren;
}) {
  return (
    // The table scrolls inside its own box on a narrow screen; the page never scrolls sideways.
    <div class="scroll">
      <table>
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
