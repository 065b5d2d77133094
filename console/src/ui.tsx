import type { ComponentChildren } from 'preact';
import { useEffect, useId, useRef, useState } from 'preact/hooks';

/**
 * A modal dialog of the page (<dialog> with showModal: focus moves in, the rest is inert, Escape
 * closes it). Rendered only while open; `onClose` runs however it closes.
 */
export function Dialog(props: { title: string; onClose: () => void; children: ComponentChildren }) {
  const ref = useRef<HTMLDialogElement>(null);
  const id = useId();
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    return () => dialog?.close();
  }, []);
  return (
    <dialog ref={ref} aria-labelledby={id} onClose={props.onClose}>
      <h2 id={id}>{props.title}</h2>
      {props.children}
    </dialog>
  );
}

/** A confirmation: its question, a button naming the action (default "Delete") and "Cancel". */
export function Confirm(props: {
  title: string;
  question: string;
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
export function Status({ message }: { message: string }) {
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
export function Secret(props: { label: string; value: string; onDone: () => void }) {
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
      <h3 id={`${id}-h`}>{props.label}</h3>
      <p>Copy it now: it is shown this once and cannot be shown again.</p>
      <div class="row">
        <label for={id} class="visually-hidden">
          {props.label}
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
