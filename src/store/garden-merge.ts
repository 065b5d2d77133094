/** Reads up to `n` of one garden's rows after position `after`, in the listing's order (one index range). */
export type GardenRead<T, P = number> = (garden: string, after: P, n: number) => T[];

/** A listing's order: whether row `a` comes before `b`, and the position a row's successors follow. */
export interface ListingOrder<T, P> {
  before(a: T, b: T): boolean;
  positionOf(row: T): P;
}

const BY_ID: ListingOrder<{ id: number }, number> = {
  before: (a, b) => a.id < b.id,
  positionOf: (r) => r.id,
};

/**
 * One keyset page across several gardens: up to `limit` rows with id > `afterId`, in id order, as
 * a k-way merge of each garden's own index-ordered reads. Each garden is first read for a slice of
 * about its share of the page; a garden whose slice runs out while the page still needs rows is
 * read again from where it stopped, for no more than the page still needs. So the rows read are
 * bounded by the page and the number of gardens, never by how many plants the caller can see (the
 * trap of `garden IN (…) ORDER BY id`, which reads every visible row after the cursor to sort them).
 * A plant is in exactly one garden, so no row comes twice.
 */
export function mergeGardens<T extends { id: number }>(
  gardens: readonly string[],
  afterId: number,
  limit: number,
  read: GardenRead<T>,
): T[] {
  return mergeOrdered(gardens, afterId, limit, read, BY_ID as ListingOrder<T, number>);
}

/** As mergeGardens, for any listing whose rows each garden reads in `order` (the trash: newest first). */
export function mergeOrdered<T, P>(
  gardens: readonly string[],
  after: P,
  limit: number,
  read: GardenRead<T, P>,
  order: ListingOrder<T, P>,
): T[] {
  if (gardens.length === 1) return read(gardens[0]!, after, limit);
  // A garden named twice is read once: each row comes once.
  if (new Set(gardens).size !== gardens.length)
    return mergeOrdered([...new Set(gardens)], after, limit, read, order);
  const slice = Math.min(limit, Math.ceil(limit / gardens.length) + 4);
  const heads = gardens.map((garden) => {
    const rows = read(garden, after, slice);
    return { garden, rows, at: 0, more: rows.length === slice };
  });
  const page: T[] = [];
  while (page.length < limit) {
    let best: (typeof heads)[number] | undefined;
    for (const h of heads) {
      if (h.at === h.rows.length) {
        if (!h.more) continue;
        // Its rows so far all made the page; what follows may be needed, up to the page's rest.
        const need = limit - page.length;
        h.rows = read(h.garden, order.positionOf(h.rows[h.rows.length - 1]!), need);
        h.at = 0;
        h.more = h.rows.length === need;
        if (h.rows.length === 0) continue;
      }
      if (best === undefined || order.before(h.rows[h.at]!, best.rows[best.at]!)) best = h;
    }
    if (best === undefined) break;
    page.push(best.rows[best.at++]!);
  }
  return page;
}
