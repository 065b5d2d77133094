import type { ComponentChildren, Ref } from 'preact';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { useApi } from './api.js';

/**
 * A modal dialog of the page (<dialog> with showModal: focus moves in, the rest is inert, Escape
 * closes it). Rendered only while open; `onClose` runs however it closes.
 */
export function Dialog(props: {
  title: ComponentChildren;
  onClose: () => void;
  /** Wider than a form's (a table of events). */
  wide?: boolean;
  children: ComponentChildren;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const id = useId();
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    return () => dialog?.close();
  }, []);
  return (
    <dialog ref={ref} aria-labelledby={id} onClose={props.onClose} class={props.wide ? 'wide' : undefined}>
      <h2 id={id}>{props.title}</h2>
      {props.children}
    </dialog>
  );
}

/** A confirmation: its question, a button naming the action (default "Delete") and "Cancel". */
export function Confirm(props: {
  title: string;
  question: ComponentChildren;
  action?: string;
  error?: string | null;
  onConfirm: () => void | Promise<void>;
  onCancel: () => void;
}) {
  // The harmless choice has the focus first (after showModal, which runs in the child's effect):
  // Enter alone never destroys anything.
  const cancel = useRef<HTMLButtonElement>(null);
  useEffect(() => cancel.current?.focus(), []);
  return (
    <Dialog title={props.title} onClose={props.onCancel}>
      <p>{props.question}</p>
      <ErrorText error={props.error ?? null} />
      <div class="actions">
        <button type="button" class="danger" onClick={() => props.onConfirm()}>
          {props.action ?? 'Delete'}
        </button>
        <button type="button" onClick={props.onCancel} ref={cancel}>
          Cancel
        </button>
      </div>
    </Dialog>
  );
}

/**
 * A view of the console: a section named by its heading, which the console focuses when the view
 * opens (and a view may focus again through `heading`, after what it showed is gone). `loading`:
 * its first read is on its way; the section is aria-busy and says "Loading…".
 */
export function View(props: {
  id: string;
  title: string;
  heading?: Ref<HTMLHeadingElement>;
  loading?: boolean;
  children: ComponentChildren;
}) {
  return (
    <section aria-labelledby={`${props.id}-h`} aria-busy={props.loading ? 'true' : undefined}>
      <h2 id={`${props.id}-h`} ref={props.heading} tabIndex={-1}>
        {props.title}
      </h2>
      <Loading on={props.loading ?? false} />
      {props.children}
    </section>
  );
}

/** "Loading…" as a status while `on`; the region stays in the page so that its change is read out. */
export const Loading = ({ on }: { on: boolean }) => (
  <p role="status" class="status loading">
    {on ? 'Loading…' : ''}
  </p>
);

/**
 * Text from the service (a plant's or garden's name, a tag, a user, a URL) isolated from the text
 * around it, so that bidi controls in it (U+202E) cannot reorder what follows.
 */
export const Name = ({ of }: { of: string }) => <bdi>{of}</bdi>;

/**
 * A name from the service within a sentence, in quotes, the quotes isolated with it: “Fern”. (The
 * element holding the name is then never one whose whole text is the name, as its table cell is,
 * so that finding a plant by its name finds one element.)
 */
export const Quoted = ({ of }: { of: string }) => <bdi>“{BIDI.test(of) ? `\u2068${of}\u2069` : of}”</bdi>;

// A name holding bidi controls is also isolated inside its quotes (U+2068 … U+2069), so that an
// override in it cannot turn its closing quote around; other names are left as they are.
const BIDI = /[\u202A-\u202E\u2066-\u2069]/;

/** A confirmation to ask about one thing (a plant, a member), and its failure. */
export interface Asking<T> {
  /** What the confirmation asks about; null while none is asked. */
  about: T | null;
  error: string | null;
  /** Asks about `about` (a failure shown before is forgotten). */
  ask: (about: T) => void;
  /** Closes it, keeping its failure, or showing `error`, beside what it was about. */
  close: (error?: string) => void;
  /** Closes it and forgets its failure: "Cancel". */
  cancel: () => void;
  /** Runs the confirmed action; its failure is shown in the confirmation (`explain` may add to it). */
  run: (action: () => Promise<void>, explain?: (err: unknown, sentence: string) => string) => Promise<void>;
}

/** The state of a Confirm: what it asks about, and the failure of its action. */
export function useAsking<T>(): Asking<T> {
  const { fail } = useApi();
  const [about, setAbout] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  return {
    about,
    error,
    ask: (t) => {
      setError(null);
      setAbout(t);
    },
    close: (failure) => {
      setAbout(null);
      if (failure !== undefined) setError(failure);
    },
    cancel: () => {
      setAbout(null);
      setError(null);
    },
    run: async (action, explain) => {
      try {
        await action();
      } catch (err) {
        const sentence = fail(err);
        setError(explain ? explain(err, sentence) : sentence);
      }
    },
  };
}

/**
 * A primary button that shows and hides the form it opens, just below it (`controls`: the form's
 * id). `form(close)` makes the form, which calls `close` when it is done.
 */
export function Opener(props: {
  label: string;
  controls: string;
  form: (close: () => void) => ComponentChildren;
}) {
  const [open, setOpen] = useState(false);
  return (
    <>
      <div class="actions">
        <button
          type="button"
          class="primary"
          aria-expanded={open}
          aria-controls={props.controls}
          onClick={() => setOpen(!open)}
        >
          {props.label}
        </button>
      </div>
      {open && props.form(() => setOpen(false))}
    </>
  );
}

/** An error as an alert (read out when it appears); nothing when there is none. */
export function ErrorText({ error }: { error: string | null }) {
  return error ? (
    <p role="alert" class="error">
      {error}
    </p>
  ) : null;
}

/**
 * A polite live region for what just happened ("Created …"). It stays in the page, so that
 * screen readers hear each new message.
 */
export function Status({ message }: { message: ComponentChildren }) {
  return (
    <p role="status" class="status">
      {message}
    </p>
  );
}

/**
 * A secret shown this once, with a "Copy" button: it is never shown again, and the console keeps
 * it nowhere once dismissed.
 */
export function Secret(props: { label: string; of: string; value: string; onDone: () => void }) {
  const [copied, setCopied] = useState('');
  const input = useRef<HTMLInputElement>(null);
  const id = useId();
  useEffect(() => input.current?.focus(), []);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.value);
      setCopied('Copied to the clipboard.');
    } catch {
      // No clipboard (plain http, or refused): select it for the person to copy.
      input.current?.select();
      setCopied('Could not copy by itself: the secret is selected, copy it with Ctrl+C or ⌘C.');
    }
  };
  return (
    <section class="secret" aria-labelledby={`${id}-h`}>
      <h3 id={`${id}-h`}>
        {props.label} <Name of={props.of} />
      </h3>
      <p>Copy it now: it is shown this once and cannot be shown again.</p>
      <div class="row">
        <label for={id} class="visually-hidden">
          {props.label} <Name of={props.of} />
        </label>
        <input id={id} ref={input} readOnly value={props.value} spellcheck={false} autocomplete="off" />
        <button type="button" onClick={copy}>
          Copy
        </button>
        <button type="button" onClick={props.onDone}>
          Done
        </button>
      </div>
      <Status message={copied} />
    </section>
  );
}

/** A date for people, in their locale; "—" for none. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}
