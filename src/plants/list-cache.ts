import type { Caller } from '../tokens/verifier.js';
import type { Page, PlantService } from './service.js';

/** A list page as it is answered: the serialized body and its Link header. */
export interface RenderedPage {
  body: string | Buffer;
  link: string | undefined;
}

export interface ListQuery {
  limit?: number;
  tag?: string;
  cursor?: string;
  include?: 'id';
}

interface Entry {
  body: Buffer;
  link: string | undefined;
  version: string;
}

/**
 * List pages, rendered, kept while the store's list version for their owner is unchanged: a
 * caching layer over PlantService.list. Only engines that know every write (SQLite) give a
 * version, so a page can never outlive a change to the plants it shows; elsewhere every list
 * goes to the store. Requests that miss together (after a write, every connection's next list)
 * wait for one build instead of each querying and serializing the same page: fifty concurrent
 * builds of a 1,000-plant page held the event loop for ~50 ms. Bounded by total body size; the
 * oldest entries go first. The body is kept as bytes, so a hit neither encodes a string to UTF-8
 * nor measures it again.
 */
export class ListCache {
  private readonly pages = new Map<string, Entry>();
  private readonly building = new Map<string, Promise<Entry>>();
  private bytes = 0;

  constructor(
    private readonly service: PlantService,
    private readonly maxBytes = 16 * 1024 * 1024,
  ) {}

  /** The caller's page for `q`, rendered by `render` when it is not kept. */
  async get(
    caller: Caller,
    q: ListQuery,
    render: (page: Page) => { body: string; link: string | undefined },
  ): Promise<RenderedPage> {
    // Read the version before the store: a write landing in between only makes the entry stale.
    const asked = this.service.listVersion(caller);
    const build = async () => render(await this.service.list(caller, q));
    if (asked === undefined) return build();
    const version = await asked;
    const admin = caller.scopes.has('plants:admin');
    const key = `${admin ? 'A' : 'U'}${caller.user}\0${q.limit}\0${q.tag ?? '\u0001'}\0${q.cursor}\0${q.include}`;
    const hit = this.lookup(key, version);
    if (hit) return hit;
    const flight = `${key}\0${version}`;
    let pending = this.building.get(flight);
    if (pending === undefined) {
      pending = build()
        .then(({ body, link }) => {
          const entry = { body: Buffer.from(body), link, version };
          this.store(key, entry);
          return entry;
        })
        .finally(() => this.building.delete(flight));
      this.building.set(flight, pending);
    }
    return pending;
  }

  private lookup(key: string, version: string): Entry | undefined {
    const page = this.pages.get(key);
    if (page === undefined) return undefined;
    if (page.version === version) return page;
    this.delete(key, page);
    return undefined;
  }

  private store(key: string, page: Entry): void {
    if (page.body.byteLength > this.maxBytes / 4) return;
    const old = this.pages.get(key);
    if (old) this.delete(key, old);
    this.pages.set(key, page);
    this.bytes += page.body.byteLength;
    for (const [k, p] of this.pages) {
      if (this.bytes <= this.maxBytes) break;
      this.delete(k, p);
    }
  }

  private delete(key: string, page: Entry): void {
    this.pages.delete(key);
    this.bytes -= page.body.byteLength;
  }
}
