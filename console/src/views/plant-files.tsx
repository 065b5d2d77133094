import { type ExportQuery, PlantStoreError } from 'plantstore/client';
import type { ComponentChildren } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { useApi } from '../api.js';
import { Name } from '../ui.js';

// The Plants view's "Export CSV" link and "Import CSV" button (contract section 11, version 4).

/**
 * "Export CSV" (comma) and "Export for Excel (;)": the export of what the filters show, the second
 * with `;` between cells, as Excel reads a CSV where the list separator is `;` (German, French…).
 * The request needs the token, so a click reads the export and hands the file to the browser as a
 * download, as the service sent it (the BOM Excel needs included).
 */
export function ExportLinks(props: { query: ExportQuery; onError: (message: string) => void }) {
  const { store, fail } = useApi();
  const link = (delimiter: ',' | ';') => {
    const params = new URLSearchParams({ format: 'csv', ...props.query });
    if (delimiter === ';') params.set('delimiter', ';');
    return `/plants/export?${params}`;
  };
  const download = (delimiter: ',' | ';') => async (e: Event) => {
    e.preventDefault();
    try {
      // The client keeps the BOM (a decoder that dropped it would make Excel misread the accents).
      let text = '';
      for await (const line of store.plants.exportText(props.query, 'csv', { delimiter })) text += line;
      const url = URL.createObjectURL(new Blob([text], { type: 'text/csv; charset=utf-8' }));
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

// The places a refused CSV's details name (as the service's own summary says them).
const ROW = /^\/(rows|columns)(?:\/(\d+))?(?:\/(\w+))?$/;

// A refused row as a person reads it: "Row 4, name: must not be empty", "Row 3: has 4 cells…",
// "Header column 2: …", "The header must include a name column".
function reason(d: { field: string; message: string }): string {
  const m = ROW.exec(d.field);
  if (!m || (m[1] === 'rows' && !m[2])) return d.message;
  if (m[1] === 'columns') return m[2] ? `Header column ${m[2]}: ${d.message}` : `The header ${d.message}`;
  return m[3] ? `Row ${m[2]}, ${m[3]}: ${d.message}` : `Row ${m[2]}: ${d.message}`;
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
