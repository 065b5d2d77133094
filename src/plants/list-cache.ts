import type { Caller } from '../identity/caller.js';
import type { Page } from '../paging.js';
import type { ListMarks, PagePlant } from '../store/store.js';
import type { ListScope, PlantService } from './service.js';

/**
 * A list page as it is answered: the serialized body, and where the next page starts. No Link
 * header: the same page is asked as /plants?garden=G and as /gardens/G/plants, and each route
 * writes the link for its own path.
 */
export interface RenderedPage {
  body: string | Buffer;
  /** The next page's cursor; null on the last page. */
  next: string | null;
  limit: number;
}

export interface ListQuery {
  limit?: number;
  tag?: string;
  cursor?: string;
  include?: string;
  withVersion?: boolean;
  /**
   * Search (contract 2's `q`). Its pages are kept under the same marks as the list's: a page of
   * matches is the list's page with the plants that do not match left out, in the same order, so
   * what changes a list page (a delete, a change — a rename moves the marks like any change —, a
   * create below the newest id) is what changes a page of matches, and a plant created after every
   * other one lands only on the last.
   */
  q?: string;
}

interface Entry {
  body: Buffer;
  next: string | null;
  limit: number;
  /** The store's marks read before the page was: it is exact for any marks that agree with these. */
  marks: ListMarks;
  /** The last page (no next): a plant created after every other one lands on it. */
  last: boolean;
}

/**
 * The body's UTF-8 bytes in a buffer of their own. Buffer.from would take a body under 4 KiB from
 * Node's shared 8 KiB pool, and a kept page would then hold the whole 8 KiB block (and whatever
 * else was cut from it) alive: in a 10-minute soak with many small pages kept, external memory
 * grew to ~180 MB while the cache counted 16 MiB.
 */
function ownBytes(body: string): Buffer {
  const bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(body));
  bytes.write(body);
  return bytes;
}

/** Whether a page built under `was` still shows what the store holds under `now`. */
const stillExact = (page: Entry, now: ListMarks): boolean =>
  page.marks.reorder === now.reorder && (!page.last || page.marks.top === now.top);

/**
 * List pages, rendered, kept while the store's marks (ListMarks) say they are still exact: a
 * caching layer over PlantService.list. A plant created with a server-assigned id comes after every
 * other, so it changes only the last page of each list it belongs to; every other page of that
 * owner survives it. A delete, or a create below the newest id, drops all the owner's pages. Only
 * engines that know every write give marks (SQLite in memory; PostgreSQL in the database, moved by
 * triggers in each write's transaction and read before the page), so a page can never outlive a
 * change to the plants it shows, whichever process made it; elsewhere (and for an admin's list of
 * everyone's plants on PostgreSQL) every list goes to the store. Requests that miss together (after a
 * write, every connection's next list) wait for one build instead of each querying and
 * serializing the same page: fifty concurrent builds of a 1,000-plant page held the event loop for
 * ~50 ms. Bounded by total body size; the oldest entries go first. The body is kept as bytes, so a
 * hit neither encodes a string to UTF-8 nor measures it again.
 */
export class ListCache {
  private readonly pages = new Map<string, Entry>();
  private readonly building = new Map<string, Promise<Entry>>();
  private bytes = 0;

  constructor(
    private readonly service: PlantService,
    private readonly maxBytes = 16 * 1024 * 1024,
  ) {}

  /**
   * The caller's page for `q` over `scope` (the gardens it may see, as read for this request), rendered
   * by `render` when it is not kept. The gardens are part of the key: a page kept for one set of
   * memberships is never answered to another, so a change of membership is seen at once.
   */
  async get(
    caller: Caller,
    scope: ListScope,
    q: ListQuery,
    render: (page: Page<PagePlant>) => string,
  ): Promise<RenderedPage> {
    // Read the marks before the store: a write landing in between only makes the entry stale.
    const asked = this.maxBytes === 0 ? undefined : this.service.listMarks(scope, q.tag);
    const marks = asked instanceof Promise ? await asked : asked;
    if (marks === undefined || marks === null) {
      const page = await this.service.list(caller, scope, q);
      return { body: render(page), next: page.next, limit: page.limit };
    }
    const gardens = scope.gardens === null ? '*' : this.joined(scope.gardens);
    const key = `${caller.user}\0${gardens}\0${scope.garden}\0${q.limit}\0${q.tag ?? '\u0001'}\0${q.cursor}\0${q.include}\0${q.q ?? '\u0001'}`;
    const hit = this.lookup(key, marks);
    if (hit) return hit;
    const flight = `${key}\0${marks.reorder}\0${marks.top}`;
    let pending = this.building.get(flight);
    if (pending === undefined) {
      pending = this.service
        .list(caller, scope, q)
        .then((page) => {
          const body = ownBytes(render(page));
          const entry = { body, next: page.next, limit: page.limit, marks, last: page.next === null };
          this.store(key, entry);
          return entry;
        })
        .finally(() => this.building.delete(flight));
      this.building.set(flight, pending);
    }
    return pending;
  }

  // A set of gardens as a key; the same array (memberships that stand still) is joined once.
  private readonly keys = new WeakMap<readonly string[], string>();
  private joined(gardens: readonly string[]): string {
    let key = this.keys.get(gardens);
    if (key === undefined) {
      key = gardens.join(',');
      this.keys.set(gardens, key);
    }
    return key;
  }

  private lookup(key: string, marks: ListMarks): Entry | undefined {
    const page = this.pages.get(key);
    if (page === undefined) return undefined;
    if (stillExact(page, marks)) return page;
    this.delete(key, page);
    return undefined;
  }

  private store(key: string, page: Entry): void {
    if (page.body.byteLength > this.maxBytes / 4) return;
    const old = this.pages.get(key);
    if (old) this.delete(key, old);
    this.pages.set(key, page);
    this.bytes += page.body.byteLength;
    while (this.bytes > this.maxBytes && this.evictOldest());
  }

  // The oldest entries go first, in insertion order, through one live iterator over the map: it
  // passes each deleted slot once. A new `for … of` from the start on every store walked past every
  // slot deleted since V8 last rehashed the map: with the cache full of deep pages (one evicted per
  // page stored) that was 19.5 µs a store against 0.5-0.9 µs (20,000 entries, measured alone), and
  // 5.6 % of a deep page's CPU in its profile.
  private oldest: MapIterator<[string, Entry]> = this.pages.entries();
  private evictOldest(): boolean {
    let next = this.oldest.next();
    // An iterator that reached the end stays there, whatever is added after: start a new one.
    if (next.done) {
      this.oldest = this.pages.entries();
      next = this.oldest.next();
      if (next.done) return false;
    }
    const [key, page] = next.value;
    this.delete(key, page);
    return true;
  }

  private delete(key: string, page: Entry): void {
    this.pages.delete(key);
    this.bytes -= page.body.byteLength;
  }
}
