// Small pieces every page uses: a service error in words, a value shown once with a copy
// button, a modal dialog, and a hook that loads data and says how it went.
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { isUserGroupServiceError } from '../../../packages/client/src/index.ts';

/** What went wrong, for a person: the service's message and code, and the request id to quote. */
export function describeError(error: unknown): string {
  if (isUserGroupServiceError(error)) return `${error.message} (${error.code}${error.requestId ? `, request ${error.requestId}` : ''})`;
  return error instanceof Error ? error.message : String(error);
}

export function ErrorAlert({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p class="alert error" role="alert">
      {describeError(error)}
    </p>
  );
}

export function Status({ message }: { message: string | null }) {
  return (
    <p class="status" role="status" aria-live="polite">
      {message ?? ''}
    </p>
  );
}

/** A secret the service shows once (a new token): selectable, copyable, and said to be shown once. */
export function ShownOnce({ label, value }: { label: string; value: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    await navigator.clipboard.writeText(value);
    setCopied(true);
  };
  return (
    <div class="shown-once">
      <p>
        <strong>{label}</strong>: shown this once. Copy it now; the service keeps only what it needs to check it.
      </p>
      <div class="copy-row">
        <input class="secret" readOnly value={value} aria-label={label} onFocus={(event) => event.currentTarget.select()} />
        <button type="button" onClick={copy}>
          {copied ? 'Copied' : 'Copy'}
        </button>
      </div>
    </div>
  );
}

/** A modal <dialog>: focus moves into it, Escape or Close closes it at once (its close event tells the page), the page behind is inert. */
export function Dialog({ title, open, onClose, children }: { title: string; open: boolean; onClose: () => void; children: ComponentChildren }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current!;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
  }, [open]);
  const titleId = `dialog-${title.replace(/\W+/g, '-').toLowerCase()}`;
  return (
    <dialog ref={ref} aria-labelledby={titleId} onClose={onClose}>
      <h2 id={titleId}>{title}</h2>
      {open ? children : null}
      <button type="button" class="secondary" onClick={() => ref.current?.close()}>
        Close
      </button>
    </dialog>
  );
}

/**
 * A Dialog that asks before an action that cannot be undone: `confirm` runs on its danger
 * button; an error it throws is shown in the dialog, which stays open.
 */
export function ConfirmDialog(props: {
  title: string;
  open: boolean;
  onClose: () => void;
  confirmLabel: string;
  confirm: () => Promise<void>;
  children: ComponentChildren;
}) {
  const [error, setError] = useState<unknown>(null);
  const run = async () => {
    setError(null);
    try {
      await props.confirm();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <Dialog
      title={props.title}
      open={props.open}
      onClose={() => {
        setError(null);
        props.onClose();
      }}
    >
      {props.children}
      <ErrorAlert error={error} />
      <button type="button" class="danger" onClick={run}>
        {props.confirmLabel}
      </button>
    </Dialog>
  );
}

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => void;
}

/** Runs `load` when `deps` change (and on reload()); the last answer wins. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [version, setVersion] = useState(0);
  // What the data was loaded for: in the render right after the deps change (before the
  // effect below runs) the data is still the previous one's, and must not pass for the new.
  const key = JSON.stringify([...deps, version]);
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean; key?: string }>({ loading: true });
  useEffect(() => {
    let current = true;
    setState((previous) => ({ ...previous, loading: true }));
    load().then(
      (data) => current && setState({ data, loading: false, key }),
      (error) => current && setState({ error, loading: false, key }),
    );
    return () => {
      current = false;
    };
  }, [key]);
  return { data: state.data, error: state.error, loading: state.loading || state.key !== key, reload: () => setVersion((v) => v + 1) };
}

/**
 * A table that scrolls sideways inside its card on a narrow screen (a phone, 390 px) instead
 * of widening the page. Focusable, so that a keyboard can scroll it too.
 */
export function ScrollingTable({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a region that scrolls sideways must take focus to be scrolled by keyboard (axe: scrollable-region-focusable)
    <div class="table-scroll" role="region" aria-label={label} tabIndex={0}>
      {children}
    </div>
  );
}

/** A history, newest first: each entry's time, then what `children` says happened. */
export function Timeline<T extends { id: number; created_at: string }>({
  entries,
  children,
}: {
  entries: T[] | undefined;
  children: (entry: T) => ComponentChildren;
}) {
  return (
    <ol class="timeline">
      {entries?.map((entry) => (
        <li key={entry.id}>
          <p class="when">{formatTime(entry.created_at)}</p>
          {children(entry)}
        </li>
      ))}
    </ol>
  );
}

type Actor = 'api_token' | 'command_line' | 'first_start' | 'service';

/** Who made a change, as the entry's `actor` says (docs/api.md, "GET /api/user/history"). */
export function actedBy(entry: { actor: Actor; actor_token_id: number | null }): string {
  switch (entry.actor) {
    case 'api_token':
      return `by API token ${entry.actor_token_id}`;
    case 'command_line':
      return 'by the command-line tool';
    case 'first_start':
      return 'at the first start';
    case 'service':
      return 'by the service';
  }
}

/** What a token or endpoint not restricted to one environment shows, in the word `ugs` uses (`--env any`). */
export const ANY_ENVIRONMENT = 'any';

/**
 * Text longer than its field's limit, said next to it rather than cut: a paste cut silently
 * at the limit would be saved as something nobody typed. Characters are counted as the
 * service counts them (code points, docs/api.md, "The user group").
 */
export function lengthProblem(value: string, maxLength: number | undefined): string | undefined {
  if (maxLength === undefined) return undefined;
  const length = [...value].length;
  return length > maxLength ? `${length} characters: at most ${maxLength}. Shorten it; nothing is cut.` : undefined;
}

export const formatTime = (iso: string | null | undefined) =>
  iso ? new Date(iso).toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'medium', timeZone: 'UTC' }) + ' UTC' : '—';
