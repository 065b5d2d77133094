import { type ExportQuery, PlantStoreError } from 'plantstore/client';
import { useRef, useState } from 'preact/hooks';
import { useApi } from '../api.js';

// The Plants view's "Export CSV" link and "Import CSV" button (contract section 11, version 4).

/**
 * "Export CSV": the export of what the filters show. The request needs the token, so a click reads
 * the export through the client and hands the file to the browser as a download.
 */
export function ExportLink(props: { query: ExportQuery; onError: (message: string) => void }) {
  const { store, fail } = useApi();
  const params = new URLSearchParams({ format: 'csv', ...props.query });
  const download = async (e: Event) => {
    e.preventDefault();
    try {
      let text = '';
      for await (const line of store.plants.exportText(props.query, 'csv')) text += line;
      const url = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
      const a = document.createElement('a');
      a.href = url;
      a.download = 'plants.csv';
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    } catch (err) {
      props.onError(fail(err));
    }
  };
  return (
    <a class="button" href={`/plants/export?${params}`} onClick={download}>
      Export CSV
    </a>
  );
}

// A refused row as a person reads it: "Row 4, name: must not be empty".
function reason(d: { field: string; message: string }): string {
  const m = /^\/(rows|columns)\/(\d+)(?:\/(\w+))?$/.exec(d.field);
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
  onDone: (message: string) => Promise<void>;
}) {
  const { store, fail } = useApi();
  const input = useRef<HTMLInputElement>(null);
  const [busy, setBusy] = useState(false);
  const [refused, setRefused] = useState<{ title: string; rows: string[] } | null>(null);

  const chosen = async (file: File) => {
    setBusy(true);
    setRefused(null);
    try {
      const made = await store.plants.batch(
        { csv: await file.text() },
        props.garden ? { garden: props.garden } : {},
      );
      await props.onDone(`Created ${made.created} plants from ${file.name}.`);
    } catch (err) {
      const rows = err instanceof PlantStoreError ? (err.details ?? []).map(reason) : [];
      setRefused({ title: `Nothing was created from ${file.name}. ${fail(err)}`, rows });
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
          <p>{refused.title}</p>
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
