import { type ErrorBody, type ExportQuery, PlantStoreError } from 'plantstore/client';
import type { ComponentChildren } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { useApi } from '../api.js';
import { Name } from '../ui.js';

// The Plants view's "Export CSV" link and "Import CSV" button (contract section 11, version 4).

/**
 * "Export CSV" (comma) and "Export for Excel (;)": the export of what the filters show, the second
 * with `;` between cells, as Excel reads a CSV where the list separator is `;` (German, French…).
 * The request needs the token, so a click reads the export and hands the file to the browser as a
 * download, its bytes as the service sent them (the BOM Excel needs included: text decoded line
 * by line would drop it).
 */
export function ExportLinks(props: { query: ExportQuery; onError: (message: string) => void }) {
  const { token, fail } = useApi();
  const link = (delimiter: ',' | ';') => {
    const params = new URLSearchParams({ format: 'csv', ...props.query });
    if (delimiter === ';') params.set('delimiter', ';');
    return `/plants/export?${params}`;
  };
  const download = (delimiter: ',' | ';') => async (e: Event) => {
    e.preventDefault();
    try {
      const bytes = await exportBytes(token, link(delimiter));
      const url = URL.createObjectURL(new Blob([bytes], { type: 'text/csv; charset=utf-8' }));
      const a = document.createElement('a');
      a.href = url;
      a.download = delimiter === ';' ? 'plants-semicolon.csv' : 'plants.csv';
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    } catch (err) {
      props.onError(fail(err));
    }
  };
  return (
    <>
      <a class="button" href={link(',')} onClick={download(',')}>
        Export CSV
      </a>
      <a
        class="button"
        href={link(';')}
        onClick={download(';')}
        title="A CSV file with ; between cells, as Excel opens it where the list separator is ; (German, French, …)"
      >
        Export for Excel (;)
      </a>
    </>
  );
}

/** The export's body as bytes, or the service's refusal as a PlantStoreError. */
async function exportBytes(token: string, path: string): Promise<ArrayBuffer> {
  let res: Response;
  try {
    res = await fetch(path, { headers: { authorization: `Bearer ${token}`, accept: 'text/csv' } });
  } catch {
    throw new PlantStoreError(0, 'unreachable', 'the service could not be reached');
  }
  if (!res.ok) {
    const body = (await res.json().catch(() => ({}))) as Partial<ErrorBody>;
    throw new PlantStoreError(
      res.status,
      body.code ?? 'error',
      body.message ?? `the export failed (${res.status})`,
      body.details,
      res.headers.get('x-request-id'),
    );
  }
  return res.arrayBuffer();
}

const ROW = /^\/(rows|columns)\/(\d+)(?:\/(\w+))?$/;

// A refused row as a person reads it: "Row 4, name: must not be empty".
function reason(d: { field: string; message: string }): string {
  const m = ROW.exec(d.field);
  if (!m) return d.message;
  const where = `${m[1] === 'rows' ? 'Row' : 'Column'} ${m[2]}${m[3] ? `, ${m[3]}` : ''}`;
  return `${where}: ${d.message}`;
}

/**
 * "Import CSV": a file picker; the file is one batch, all or nothing (plants without a garden go to
 * `garden`, else the home garden). Says how many were created, or each refused row and why.
 */
export function ImportButton(props: {
  garden: string | undefined;
  onDone: (message: ComponentChildren) => Promise<void>;
}) {
  const { store, fail } = useApi();
  const input = useRef<HTMLInputElement>(null);
  const [busy, setBusy] = useState(false);
  const [refused, setRefused] = useState<{ file: string; rows: string[]; reason: string | null } | null>(
    null,
  );

  const chosen = async (file: File) => {
    setBusy(true);
    setRefused(null);
    try {
      // The file's bytes as they are: the service tells a file that is not UTF-8 (Excel's
      // "CSV (Comma delimited)" is Windows-1252) and says how to save it; text decoded here would
      // already have turned its letters into U+FFFD.
      const made = await store.plants.batch({ csv: file }, props.garden ? { garden: props.garden } : {});
      await props.onDone(
        <>
          Created {made.created} plants from <Name of={file.name} />.
        </>,
      );
    } catch (err) {
      // Said once: the refused rows when the service names them, else its sentence.
      const rows =
        err instanceof PlantStoreError
          ? (err.details ?? []).filter((d) => ROW.test(d.field ?? '')).map(reason)
          : [];
      setRefused({ file: file.name, rows, reason: rows.length ? null : fail(err) });
    } finally {
      setBusy(false);
      if (input.current) input.current.value = '';
    }
  };

  return (
    <>
      <button type="button" disabled={busy} onClick={() => input.current?.click()}>
        Import CSV
      </button>
      <input
        ref={input}
        type="file"
        accept=".csv,text/csv"
        hidden
        onChange={(e) => {
          const file = e.currentTarget.files?.[0];
          if (file) void chosen(file);
        }}
      />
      {refused && (
        <div role="alert" class="notice">
          <p>
            Nothing was created from <Name of={refused.file} />.{refused.reason ? ` ${refused.reason}` : ''}
          </p>
          {refused.rows.length > 0 && (
            <ul>
              {refused.rows.map((r) => (
                <li key={r}>{r}</li>
              ))}
            </ul>
          )}
        </div>
      )}
    </>
  );
}
