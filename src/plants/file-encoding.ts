import { isUtf8 } from 'node:buffer';

// Whether the bytes of a batch file are UTF-8 (contract 2, POST /plants/batch), and if not, a
// sentence saying what they are and how to save them right. Decoding them anyway would replace
// each bad byte with U+FFFD and store "Gr��e" for a Windows-1252 "Größe"; the service and
// `plants import` both refuse them with the same words.

const ADVICE =
  'Save it as "CSV UTF-8 (Comma delimited)" in Excel, or choose the UTF-8 character set in LibreOffice or Google Sheets, and import it again.';

/** The kind of file a batch body holds: its advice differs (a spreadsheet saves CSV). */
export type FileKind = 'csv' | 'ndjson';

/**
 * The offset of the first byte that does not begin or continue a well-formed UTF-8 sequence (-1:
 * none; Unicode 15, table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF).
 */
export function firstBadByte(b: Uint8Array): number {
  let i = 0;
  while (i < b.length) {
    const c = b[i]!;
    let n = 0;
    let lo = 0x80;
    let hi = 0xbf;
    if (c < 0x80) n = 0;
    else if (c >= 0xc2 && c <= 0xdf) n = 1;
    else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      if (c === 0xe0) lo = 0xa0;
      if (c === 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      if (c === 0xf0) lo = 0x90;
      if (c === 0xf4) hi = 0x8f;
    } else return i;
    for (let k = 1; k <= n; k++) {
      const d = b[i + k];
      if (d === undefined || d < (k === 1 ? lo : 0x80) || d > (k === 1 ? hi : 0xbf)) return i;
    }
    i += n + 1;
  }
  return -1;
}

const hex = (byte: number) => `0x${byte.toString(16).toUpperCase().padStart(2, '0')}`;

/**
 * Why these bytes are not a UTF-8 file (null: they are): UTF-16 (its byte order mark, or the NUL
 * bytes its ASCII letters have), or the first byte that is not UTF-8 and the line it is on.
 */
export function encodingProblem(bytes: Uint8Array, kind: FileKind): string | null {
  const advice = kind === 'csv' ? ADVICE : 'Save it as UTF-8 and import it again.';
  const utf16 =
    (bytes[0] === 0xff && bytes[1] === 0xfe) ||
    (bytes[0] === 0xfe && bytes[1] === 0xff) ||
    (bytes.length >= 2 && (bytes[0] === 0 || bytes[1] === 0));
  if (utf16) {
    const saver = kind === 'csv' ? ` (Excel's "Unicode Text" saves UTF-16)` : '';
    return `The file is UTF-16 text${saver}, not UTF-8. ${advice}`;
  }
  if (isUtf8(bytes)) return null;
  const at = firstBadByte(bytes);
  let line = 1;
  for (let i = 0; i < at; i++) if (bytes[i] === 0x0a) line++;
  const saver = kind === 'csv' ? `; Excel's "CSV (Comma delimited)" saves Windows-1252` : '';
  return `The file is not UTF-8 text (byte ${hex(bytes[at]!)} at line ${line} is not UTF-8${saver}). ${advice}`;
}

const UTF8_NAMES = new Set(['utf-8', 'utf8', 'us-ascii', 'ascii']);

/**
 * The charset a Content-Type names when it is not UTF-8 (or ASCII, a part of it), as given; null
 * when it names none or UTF-8. `text/csv; charset="Windows-1252"` → `Windows-1252`.
 */
export function foreignCharset(contentType: string | undefined): string | null {
  if (contentType === undefined) return null;
  for (const param of contentType.split(';').slice(1)) {
    const eq = param.indexOf('=');
    if (eq < 0 || param.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    let value = param.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    if (!UTF8_NAMES.has(value.trim().toLowerCase())) return value;
  }
  return null;
}
