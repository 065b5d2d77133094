import { createHash, type Hash } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { Writable } from 'node:stream';
import { Compile } from 'typebox/compile';
import {
  RECORD_KINDS,
  RECORD_SCHEMAS,
  type RecordKind,
  StoreFileHeader,
  StoreRecord,
} from '../schemas/store-file.js';
import { recordName } from '../store/dump.js';
import { illFormedAt } from '../text-rules.js';
import { StoreFileRules } from './store-file-rules.js';

// The export file of contract section 12: a header line, one JSON line per record, and a trailer
// with the counts of each kind and the SHA-256 of every line before it (each with its newline).
// Engine-neutral: what one engine writes, the other loads (src/store/*/dump.ts).

export const FORMAT = 'plantstore-export';
export const FORMAT_VERSION = 1;

export type Counts = Record<RecordKind, number>;

const zeroCounts = (): Counts => Object.fromEntries(RECORD_KINDS.map((k) => [k, 0])) as Counts;

/** Why a file is not one this version can import; the message names the line and the problem. */
export class StoreFileRefused extends Error {}

/** A record that breaks its schema (the API's field rules) or what the records say of each other. */
export class StoreRecordRefused extends StoreFileRefused {}

const checkHeader = Compile(StoreFileHeader);
const checkRecord = Compile(StoreRecord);
const checkKind = new Map(Object.entries(RECORD_SCHEMAS).map(([k, schema]) => [k, Compile(schema)]));

/** Writes an export: header, records, trailer; backpressure respected, lines gathered into chunks. */
export class StoreFileWriter {
  private readonly hash: Hash = createHash('sha256');
  private readonly counts = zeroCounts();
  private chunk = '';

  constructor(
    private readonly out: Writable,
    schema: { engine: string; migration: number },
  ) {
    const header: StoreFileHeader = {
      format: FORMAT,
      version: FORMAT_VERSION,
      schema,
      createdAt: new Date().toISOString(),
    };
    this.line(JSON.stringify(header));
  }

  private line(text: string): void {
    const l = `${text}\n`;
    this.hash.update(l);
    this.chunk += l;
  }

  /** Adds a record; resolves once the stream can take more. */
  async write(record: StoreRecord): Promise<void> {
    this.counts[record.kind]++;
    this.line(JSON.stringify(record));
    if (this.chunk.length >= 1 << 16) await this.flush();
  }

  private async flush(): Promise<void> {
    const c = this.chunk;
    this.chunk = '';
    if (c !== '' && !this.out.write(c)) await once(this.out, 'drain');
  }

  /** Writes the trailer and flushes; answers the counts. */
  async end(): Promise<Counts> {
    const trailer = { kind: 'end', counts: this.counts, sha256: this.hash.digest('hex') };
    this.chunk += `${JSON.stringify(trailer)}\n`;
    await this.flush();
    return this.counts;
  }
}

/** What a file holds, as its reader found it once the trailer checked out. */
export interface StoreFileSummary {
  header: StoreFileHeader;
  counts: Counts;
}

/**
 * Reads an export file's records in order, each checked against its schema. The trailer is checked
 * when the records are all read: a loader takes the records into a transaction and commits only
 * once the iteration ends without an error (`summary` then holds what was read). Throws
 * StoreFileRefused naming the problem: not an export, an unknown version, a truncated file (no
 * trailer) or an altered one (its checksum or counts differ); StoreRecordRefused for a record that
 * breaks its schema or store-file-rules.ts, naming its line and the rule.
 */
export class StoreFileReader {
  summary: StoreFileSummary | undefined;

  constructor(private readonly path: string) {}

  async *records(): AsyncGenerator<StoreRecord> {
    const input = createReadStream(this.path, { encoding: 'utf8', highWaterMark: 1 << 16 });
    const lines = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
    const hash = createHash('sha256');
    const counts = zeroCounts();
    let header: StoreFileHeader | undefined;
    let trailer: unknown;
    let n = 0;
    const rules = new StoreFileRules();
    try {
      for await (const text of lines) {
        n++;
        if (trailer !== undefined) throw new StoreFileRefused(`line ${n}: a line after the trailer`);
        const value = parse(text, n);
        // A lone surrogate (a \uD800 escape) would be stored as U+FFFD: the record would not be what it says.
        const bad = illFormedAt(value);
        if (bad !== null) throw new StoreRecordRefused(`line ${n}: ${bad.field.slice(1)} ${bad.message}`);
        if (header === undefined) {
          if (!isObject(value) || value.format !== FORMAT) {
            throw new StoreFileRefused('not a plantstore export (its first line is not the header)');
          }
          if (value.version !== FORMAT_VERSION) {
            throw new StoreFileRefused(
              `an export of format version ${JSON.stringify(value.version)}; this plantstore reads version ${FORMAT_VERSION}`,
            );
          }
          if (!checkHeader.Check(value))
            throw new StoreFileRefused(`line 1: ${firstError(checkHeader, value)}`);
          header = value;
          hash.update(`${text}\n`);
          continue;
        }
        if (isObject(value) && value.kind === 'end') {
          trailer = value;
          continue;
        }
        if (!checkRecord.Check(value))
          throw new StoreRecordRefused(`line ${n}: ${firstError(checkRecord, value)}`);
        const broken = rules.check(value);
        if (broken !== null) throw new StoreRecordRefused(`line ${n}: ${recordName(value)}: ${broken}`);
        hash.update(`${text}\n`);
        counts[value.kind]++;
        yield value;
      }
    } finally {
      lines.close();
      input.destroy();
    }
    if (header === undefined) throw new StoreFileRefused('the file is empty');
    if (trailer === undefined) throw new StoreFileRefused(`truncated: no trailer after line ${n}`);
    const t = trailer as { counts?: unknown; sha256?: unknown };
    if (t.sha256 !== hash.digest('hex')) {
      throw new StoreFileRefused('altered: the SHA-256 of its lines is not the one its trailer gives');
    }
    for (const k of RECORD_KINDS) {
      const stated = isObject(t.counts) ? t.counts[k] : undefined;
      if (stated !== counts[k]) {
        throw new StoreFileRefused(
          `altered: ${counts[k]} ${k} records where its trailer says ${String(stated)}`,
        );
      }
    }
    const broken = rules.end();
    if (broken !== null) throw new StoreRecordRefused(broken);
    this.summary = { header, counts };
  }
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function parse(text: string, n: number): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new StoreFileRefused(`line ${n}: not JSON`);
  }
}

function firstError(
  v: { Errors(value: unknown): { instancePath: string; message: string }[] },
  value: unknown,
): string {
  const kind = isObject(value) && typeof value.kind === 'string' ? `a ${value.kind} record: ` : '';
  // A union's first error is about whichever member it tried first: ask the record's own kind.
  const own = isObject(value) && typeof value.kind === 'string' ? checkKind.get(value.kind) : undefined;
  const e = (own ?? v).Errors(value)[0];
  return e ? `${kind}${e.instancePath || '/'} ${e.message}` : `${kind}not a record of this format`;
}

const PLURAL: Partial<Record<RecordKind, string>> = {
  delivery: 'deliveries',
  idempotency: 'idempotency keys',
  trash: 'trashed plants',
};

/** "12 plants, 3 gardens, …", every kind but the counters. */
export const describeCounts = (c: Counts): string =>
  RECORD_KINDS.filter((k) => k !== 'counters')
    .map((k) => `${c[k]} ${PLURAL[k] ?? `${k}s`}`)
    .join(', ');
