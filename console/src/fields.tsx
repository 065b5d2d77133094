import type { ComponentChildren, InputHTMLAttributes } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { useApi } from './api.js';

/** What the console's text fields set besides their value. */
interface InputProps {
  type?: 'url' | 'datetime-local' | 'search';
  required?: boolean;
  maxLength?: number;
  pattern?: string;
  placeholder?: string;
  autocomplete?: 'off';
}

/**
 * A labelled input with, optionally, help under it that is read out with the field. `focus`: it
 * takes the focus when it appears (the first field of a form just opened).
 */
export function TextField(
  props: {
    id: string;
    label: string;
    value: string;
    onValue: (value: string) => void;
    help?: ComponentChildren;
    focus?: boolean;
  } & InputProps,
) {
  const { id, label, value, onValue, help, focus, ...input } = props;
  const ref = useRef<HTMLInputElement>(null);
  useEffect(() => {
    if (focus) ref.current?.focus();
  }, [focus]);
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input
        id={id}
        ref={ref}
        value={value}
        onInput={(e) => onValue(e.currentTarget.value)}
        aria-describedby={help ? `${id}-help` : undefined}
        // Preact types an input's attributes by its type, one union member a type: these fit each.
        {...(input as InputHTMLAttributes<HTMLInputElement>)}
      />
      {help && (
        <p id={`${id}-help`} class="help">
          {help}
        </p>
      )}
    </div>
  );
}

/** A labelled choice of one of its `<option>` children. */
export function SelectField<T extends string>(props: {
  id: string;
  label: string;
  value: T;
  onValue: (value: T) => void;
  children: ComponentChildren;
}) {
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      <select id={props.id} value={props.value} onChange={(e) => props.onValue(e.currentTarget.value as T)}>
        {props.children}
      </select>
    </div>
  );
}

/** The options of a SelectField, each shown as its value. */
export const Options = (props: { values: readonly string[] }) =>
  props.values.map((v) => (
    <option key={v} value={v}>
      {v}
    </option>
  ));

/** A group of checkboxes, one an option, each named by its option: which are chosen. */
export function Choices<T extends string>(props: {
  legend: string;
  options: readonly T[];
  chosen: readonly T[];
  onChange: (chosen: T[]) => void;
}) {
  const { chosen, onChange } = props;
  return (
    <fieldset>
      <legend>{props.legend}</legend>
      {props.options.map((o) => (
        <label class="check" key={o}>
          <input
            type="checkbox"
            checked={chosen.includes(o)}
            onChange={(e) =>
              onChange(e.currentTarget.checked ? [...chosen, o] : chosen.filter((x) => x !== o))
            }
          />
          {o}
        </label>
      ))}
    </fieldset>
  );
}

/** A form's buttons: its submit button, primary, and "Cancel" when it can be cancelled. */
export function FormButtons(props: { submit: string; onCancel?: () => void }) {
  return (
    <div class="actions">
      <button type="submit" class="primary">
        {props.submit}
      </button>
      {props.onCancel && (
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
      )}
    </div>
  );
}

/**
 * A form's submit handler that runs `send` once at a time (a second press, or Enter, while the
 * first is on its way sends nothing, so one create never becomes two), and the failure to show.
 */
export function useForm(send: () => Promise<void>) {
  const { fail } = useApi();
  const [error, setError] = useState<string | null>(null);
  const busy = useRef(false);
  const submit = async (e?: Event) => {
    e?.preventDefault();
    if (busy.current) return;
    busy.current = true;
    try {
      await send();
    } catch (err) {
      setError(fail(err));
    } finally {
      busy.current = false;
    }
  };
  return { submit, error, setError };
}

/** A form in a panel of its own, named by its heading (`title`); its id is `id`. */
export function FormPanel(props: {
  id: string;
  title: string;
  onSubmit: (e: Event) => void;
  children: ComponentChildren;
}) {
  return (
    <form id={props.id} class="panel stack" onSubmit={props.onSubmit} aria-labelledby={`${props.id}-h`}>
      <h3 id={`${props.id}-h`}>{props.title}</h3>
      {props.children}
    </form>
  );
}
