import { createHash } from 'node:crypto';

/** The document as sent to one origin: its bytes and their strong ETag. */
export interface DocumentBytes {
  body: Buffer;
  etag: string;
}

// The origins whose bytes are kept. The Host header is the client's to choose, so the cache is
// bounded; a client that rotates it costs one splice and one hash a request, never a serialization.
const ORIGINS_KEPT = 16;
const PLACEHOLDER = '\u0000servers\u0000';

const digest = (text: string | Buffer): string => createHash('sha256').update(text).digest('base64url');

/**
 * /openapi.json serialized once: the document never changes once the app is ready, save for
 * `servers`, which names the origin the client reached. It is turned into JSON on first use with
 * a placeholder for `servers`; each origin's bytes are that text with its `servers` spliced in,
 * made once and kept (the most recently used ORIGINS_KEPT of them).
 */
export class OpenApiBytes {
  private parts: { head: string; tail: string; etag: string } | undefined;
  private readonly byOrigin = new Map<string, DocumentBytes>();

  constructor(private readonly document: () => object) {}

  /** The document naming `origin` in `servers`. */
  forOrigin(origin: string): DocumentBytes {
    const kept = this.byOrigin.get(origin);
    if (kept) {
      // Map order is insertion order: re-inserting marks it the most recently used.
      this.byOrigin.delete(origin);
      this.byOrigin.set(origin, kept);
      return kept;
    }
    this.parts ??= this.split();
    const parts = this.parts;
    const servers = JSON.stringify([{ url: origin }]);
    const made = {
      body: Buffer.from(parts.head + servers + parts.tail),
      etag: `"${parts.etag}.${digest(origin).slice(0, 16)}"`,
    };
    if (this.byOrigin.size >= ORIGINS_KEPT) this.byOrigin.delete(this.byOrigin.keys().next().value!);
    this.byOrigin.set(origin, made);
    return made;
  }

  private split() {
    const text = JSON.stringify({ ...this.document(), servers: PLACEHOLDER });
    const at = text.indexOf(JSON.stringify(PLACEHOLDER));
    return {
      head: text.slice(0, at),
      tail: text.slice(at + JSON.stringify(PLACEHOLDER).length),
      etag: digest(text).slice(0, 22),
    };
  }
}
