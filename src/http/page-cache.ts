/**
 * A cached list response: the serialized body and its Link header. The body is kept as bytes, so
 * a hit neither encodes a string to UTF-8 nor measures it again (a 1,000-plant page is ~60 KB;
 * encoding it per request allocated that much each time and kept the garbage collector busy).
 */
export interface CachedPage {
  version: string;
  body: Buffer;
  link: string | undefined;
}

/**
 * Serialized list pages, valid while the store's list version for their owner is unchanged.
 * Bounded by total body size; the oldest entries go first. Only engines that know every write
 * (SQLite) give a version, so a page can never outlive a change to the plants it shows.
 */
export class PageCache {
  private readonly pages = new Map<string, CachedPage>();
  private bytes = 0;

  constructor(private readonly maxBytes = 16 * 1024 * 1024) {}

  get(key: string, version: string): CachedPage | undefined {
    const page = this.pages.get(key);
    if (page === undefined) return undefined;
    if (page.version === version) return page;
    this.delete(key, page);
    return undefined;
  }

  set(key: string, page: CachedPage): void {
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

  private delete(key: string, page: CachedPage): void {
    this.pages.delete(key);
    this.bytes -= page.body.byteLength;
  }
}
