import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { useApi } from './api.js';

/** What a view read, the failure to show (of that read or of the view's own actions), and how to act. */
export interface Loaded<T> {
  /** What the last read answered; null until the first read succeeds. */
  data: T | null;
  setData: (update: (data: T | null) => T | null) => void;
  error: string | null;
  /** True while the first read is on its way (nothing read yet, no failure yet): the view says "Loading…". */
  loading: boolean;
  setError: (error: string | null) => void;
  /** Runs `what`, shows its failure as `error` (or clears it); true when it succeeded. */
  attempt: (what: () => Promise<unknown>) => Promise<boolean>;
  /** Reads again. */
  reload: () => Promise<boolean>;
}

/**
 * Reads what a view shows: at once, again whenever `read` changes (a new filter, another page; make
 * it with useCallback) and on `reload`.
 */
export function useLoad<T>(read: () => Promise<T>): Loaded<T> {
  const { fail } = useApi();
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const attempt = useCallback(
    async (what: () => Promise<unknown>) => {
      try {
        await what();
        setError(null);
        return true;
      } catch (err) {
        setError(fail(err));
        return false;
      }
    },
    [fail],
  );
  // Only the newest read's answer is shown: one that comes back after a later one (a search typed
  // on) is dropped.
  const latest = useRef(0);
  const reload = useCallback(() => {
    const n = ++latest.current;
    return attempt(async () => {
      const got = await read();
      if (n === latest.current) setData(got);
    });
  }, [attempt, read]);
  useEffect(() => {
    void reload();
  }, [reload]);
  return { data, setData, error, setError, attempt, reload, loading: data === null && error === null };
}

/** A list read a page at a time: the items of the pages read so far, and the next page's cursor. */
export interface Pages<T> {
  items: T[];
  next: string | null;
}

/**
 * A list read a page at a time, each page after the ones shown (`more`): `read(null)` reads the
 * first page, `read(next)` the one after.
 */
export function usePages<T>(
  read: (from: string | null) => Promise<Pages<T>>,
): Loaded<Pages<T>> & { more: () => Promise<boolean> } {
  const first = useCallback(() => read(null), [read]);
  const list = useLoad(first);
  const { attempt, setData } = list;
  const next = list.data?.next ?? null;
  const more = useCallback(
    () =>
      attempt(async () => {
        const page = await read(next);
        setData((shown) => ({ items: [...(shown?.items ?? []), ...page.items], next: page.next }));
      }),
    [attempt, setData, read, next],
  );
  return { ...list, more };
}
