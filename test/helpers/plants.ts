// Plant requests and list walks the garden-plants route tests share.
import assert from 'node:assert/strict';
import type { Client } from './app.js';
import { MERGE, nextLink } from './gardens.js';

/** A plant as a list shows it (id, garden and version as include= asks). */
export interface Listed {
  id?: number;
  garden?: string;
  version?: number;
  name: string;
  tag?: string;
}

/** POST /plants/batch with `payload` of content type `type` (`query`: `?ids=drop`, …), as it comes back. */
export const postBatch = (
  c: Client,
  payload: string | Buffer,
  type: string,
  query = '',
  headers: Record<string, string> = {},
) =>
  c.request({
    method: 'POST',
    url: `/plants/batch${query}`,
    headers: { 'content-type': type, ...headers },
    payload,
  });
/** POST /plants/batch with `body` as JSON, as it comes back. */
export const postBatchJson = (c: Client, body: unknown, query = '', headers: Record<string, string> = {}) =>
  postBatch(c, JSON.stringify(body), 'application/json', query, headers);
/** GET `url`, as it comes back. */
export const get = (c: Client, url: string) => c.request({ method: 'GET', url });
/** PATCH /plants/{id} with this merge patch, as it comes back. */
export const patch = (c: Client, id: number, payload: unknown, headers: Record<string, string> = {}) =>
  c.request({
    method: 'PATCH',
    url: `/plants/${id}`,
    headers: { ...MERGE, ...headers },
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });
/** DELETE /plants/{id}, as it comes back. */
export const del = (c: Client, id: number, headers: Record<string, string> = {}) =>
  c.request({ method: 'DELETE', url: `/plants/${id}`, headers });

/** Follows next links from `url`; every page's link must start with `prefix`. */
export async function walk(
  c: Client,
  url: string,
  prefix: string,
): Promise<{ items: Listed[]; pages: number }> {
  const items: Listed[] = [];
  let pages = 0;
  for (let next: string | null = url; next !== null; pages++) {
    const res = await get(c, next);
    assert.equal(res.statusCode, 200, `${next}: ${res.body}`);
    items.push(...res.json());
    next = nextLink(res);
    if (next !== null) assert.ok(next.startsWith(prefix), `${next} repeats ${prefix}`);
    assert.ok(pages < 1000, 'the walk ends');
  }
  return { items, pages };
}

/** The ids of listed plants (include=id asked). */
export const ids = (xs: Listed[]) => xs.map((x) => x.id!);
