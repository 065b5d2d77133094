/**
 * The plantstore client: `import { PlantStore } from 'plantstore/client'`. Types come from the
 * served OpenAPI document (./openapi.ts, generated at build time); the rest is a small layer on
 * `fetch` (its one dependency, eventsource-parser, reads the event stream), for Node 22+ and
 * browsers, and the service's own access rules (./access.ts), so that a caller is shown what the
 * service would allow.
 */
import { EventSourceParserStream } from 'eventsource-parser/stream';
import type { components, operations } from './openapi.js';

export {
  type Capabilities,
  can,
  capabilities,
  etagOf,
  grantableScopes,
  ROLES,
  SCOPES,
  type Scope,
} from './access.js';

type Json<T> = T extends { content: { 'application/json': infer B } } ? B : never;

/** A plant as the service answers it (the original specification's NewPlant without its id). */
export type Plant = Json<operations['getPlant']['responses'][200]>;
/** What a create sends: `name`, and optionally `tag` and `id`. */
export type PlantCreate = Json<operations['createPlant']['requestBody']>;
/** A list page's element as the service answers it: `{id?, garden?, version?, name, tag?}`. */
type ListItem = Json<operations['listPlants']['responses'][200]>[number];
/** What a list may ask each plant to carry besides its id (`include=`): its garden, its version. */
export type PlantInclude = 'garden' | 'version';
/**
 * A plant of a list page, with its id, and the fields `include` asked for: `ListedPlant<'garden'>`
 * also has `garden`, `ListedPlant<'garden' | 'version'>` also `version` (its ETag is it in quotes).
 */
export type ListedPlant<I extends PlantInclude = never> = Plant & { id: number } & Pick<
    Required<ListItem>,
    I
  >;
/** What a list reads: a page size, a tag, one garden, and what else each plant carries. */
export interface PlantQuery<I extends PlantInclude = never> {
  /** Page size, 1 … 1000 (default 100). */
  limit?: number;
  /** Only plants with exactly this tag. */
  tag?: string;
  /** Only this garden's plants (a garden the caller is not a member of: a PlantStoreError 404). */
  garden?: string;
  /** Also each plant's garden and/or version. */
  include?: readonly I[];
  /**
   * Search by name: every term (split on whitespace) a prefix of a word of the name, ignoring case
   * and accents (`mon del` finds "Monstera deliciosa").
   */
  q?: string;
}
/** What an export reads: the list's filters, without pages. */
export type ExportQuery = Pick<PlantQuery, 'tag' | 'garden' | 'q'>;
/** A plant as an export gives it (NDJSON): `{id, name, tag?, garden, version}`. */
export interface ExportedPlant {
  id: number;
  name: string;
  tag?: string;
  garden: string;
  version: number;
}
/** A batch create's answer: how many plants it made (all of them) and their ids, in input order. */
export type BatchCreated = Json<operations['createPlantsBatch']['responses'][201]>;
/**
 * A batch's plants: JSON plants, or a CSV or NDJSON body as an export writes (or a spreadsheet
 * saves). A CSV file is best given as its bytes (a `Blob`, `File` or `Uint8Array`), sent as they
 * are: the service checks they are UTF-8 and says how to save the file when they are not, where
 * text decoded here would already have lost what the file held.
 */
export type BatchInput =
  | PlantCreate[]
  | { csv: string | Blob | Uint8Array<ArrayBuffer> }
  | { ndjson: string };
/** The delimiters a CSV export may use (`GET /plants/export?delimiter=`). */
export type CsvDelimiter = ',' | ';' | '\t';
/** A garden as the service answers it: `{id, name, home, role, createdAt}`, `role` the caller's own. */
export type Garden = Json<operations['getGarden']['responses'][200]>;
/** Who the credential is (GET /me). */
export type Me = Json<operations['getMe']['responses'][200]>;
/** A member's role in a garden: `viewer`, `editor` or `owner` (CONTRACT.md section 3.2). */
export type Role = Garden['role'];
/** A garden's member: `{user, role, addedAt}`. */
export type Member = Json<operations['putMember']['responses'][201]>;
/** A JSON Merge Patch of a plant: `name`, `tag` (null removes it); absent fields stay. */
export type PlantPatch = Json<operations['updatePlant']['requestBody']>;
/**
 * A plant as one read, create or change answers it, with its ETag: pass `etag` as `ifMatch` to
 * change or delete only that version.
 */
export type TaggedPlant = Plant & { etag: string };
/** A webhook endpoint as a list answers it (never its secret). */
export type Webhook = Json<operations['listWebhooks']['responses'][200]>[number];
/** A webhook endpoint with its signing secret (a create, a read of one, a rotation). */
export type WebhookWithSecret = Json<operations['getWebhook']['responses'][200]>;
/** What a webhook create sends: `url`, optionally `events` and `description`. */
export type WebhookCreate = Json<operations['createWebhook']['requestBody']>;
/** One delivery attempt of an endpoint: status, response code, time, next retry. */
export type DeliveryAttempt = Json<operations['listWebhookDeliveries']['responses'][200]>[number];
/** A token as the service shows it (never its secret): `{id, user, scopes, name, createdAt, expiresAt, lastUsedAt, status}`. */
export type Token = Json<operations['getToken']['responses'][200]>;
/** What a token create sends: `user`, `scopes`, `expiresIn` (like `30d`), `name`, each optional. */
export type TokenCreate = Json<operations['createToken']['requestBody']>;
/** A token just made: its secret is in `token`, shown this once and never again. */
export type CreatedToken = Json<operations['createToken']['responses'][201]>;
/** What a token list reads: one user's tokens (another than the caller's needs plants:admin), a page size, a cursor. */
export interface TokenQuery {
  /** Only this user's tokens. */
  user?: string;
  /** Page size, 1 … 1000 (default 100). */
  limit?: number;
  /** Where to start: the `cursor` of a `Link: rel="next"` the service sent. */
  cursor?: string;
}
/** The service's error body. */
export type ErrorBody = components['schemas']['Error'];
/** One answer of the change feed (CONTRACT.md section 13.4): its changes, `next` and `more`. */
type ChangesAnswer = Json<operations['plantChanges']['responses'][200]>;
/** A change of the feed: `{id, op: 'upsert', plant}` (put it in the copy) or `{id, op: 'delete'}` (remove it). */
export type PlantChange = ChangesAnswer['changes'][number];
/** What a sync reads: a page size (1 … 1000, default 100), one garden only. */
export interface SyncQuery {
  limit?: number;
  garden?: string;
}
/**
 * One page of a sync: its changes, each plant id at most once, to apply in order (upsert = put,
 * delete = remove). `restarted`: the position given had expired (410 `changes_expired`), so the
 * sync began again from scratch: drop the copy before applying this page, which starts the full
 * set of plants again. `next`: the position after this page.
 */
export interface SyncPage {
  changes: PlantChange[];
  restarted: boolean;
  next: string;
  more: boolean;
}

/** A plant event (CONTRACT.md section 8) with its id. */
export type PlantEvent = components['schemas']['Event'] & { id: string };
/** An event type, as activity's `type` filter names them. */
export type EventType = PlantEvent['type'];

/** A refusal from the service, or a failure to reach it (`status` 0, `code` `unreachable`). */
export class PlantStoreError extends Error {
  override readonly name = 'PlantStoreError';
  constructor(
    /** The HTTP status; 0 when the service could not be reached. */
    readonly status: number,
    /** The contract's stable snake_case code (`unreachable`, `deadline_exceeded` from the client). */
    readonly code: string,
    message: string,
    readonly details: ErrorBody['details'] = undefined,
    /** The service's X-Request-Id for this request, for its logs. */
    readonly requestId: string | null = null,
  ) {
    super(message);
  }
}

/** Gives a bearer token for each request (a string, or a provider such as clientCredentials()). */
export type TokenSource = string | (() => string | Promise<string>);

export interface PlantStoreOptions {
  /** The service, e.g. `http://127.0.0.1:3000`. */
  url: string;
  token: TokenSource;
  /** How long one call may take in all, retries and waits included (default 30 s). */
  deadlineMs?: number;
  /** Retries after the first attempt, at most (default 4). */
  retries?: number;
  /** The fetch to use (default globalThis.fetch). */
  fetch?: typeof fetch;
}

const RETRY_STATUS = new Set([408, 429, 502, 503, 504]);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Seconds or an HTTP date, as milliseconds from now; null when absent or unreadable. */
function retryAfterMs(value: string | null): number | null {
  if (value === null) return null;
  if (/^\d+$/.test(value.trim())) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

/** The URL without its trailing slashes (a loop: /\/+$/ is quadratic in a long run of them). */
function withoutTrailingSlashes(url: string): string {
  let end = url.length;
  while (end > 0 && url[end - 1] === '/') end--;
  return url.slice(0, end);
}

/** The next page's path from a `Link: <…>; rel="next"` header. */
function nextLink(link: string | null): string | null {
  // [^<>]: each `<` scans only up to the next bracket, so a header of many `<` stays linear.
  const m = link && /<([^<>]+)>\s*;\s*rel="?next"?/.exec(link);
  return m ? m[1]! : null;
}

/**
 * A plant in its garden's trash (CONTRACT.md section 13.2): `{id, name, tag?, garden, deletedAt,
 * deletedBy, purgeAt}` (times as ISO 8601).
 */
export type TrashedPlant = Json<operations['listTrash']['responses'][200]>[number];
/** What a trash read takes: one garden, a page size, a cursor to start after (from a `Link`). */
export interface TrashQuery {
  /** Only this garden's trash (not a member: a PlantStoreError 404; a viewer: 403). */
  garden?: string;
  /** Page size, 1 … 1000 (default 100). */
  limit?: number;
  cursor?: string;
}

/** What a history or activity read takes: a page size, and a cursor to start after (from a `Link`). */
export interface EventPageQuery {
  limit?: number;
  cursor?: string;
}

/** One page of events (newest first) and the path of the next page (null on the last). */
export interface EventPage {
  events: PlantEvent[];
  next: string | null;
}

/** The query string of an event read: its page size, cursor and types. */
function eventPath(path: string, q: EventPageQuery & { type?: readonly string[] }): string {
  const params = new URLSearchParams();
  if (q.limit !== undefined) params.set('limit', String(q.limit));
  if (q.cursor !== undefined) params.set('cursor', q.cursor);
  if (q.type !== undefined) params.set('type', q.type.join(','));
  const query = params.toString();
  return query === '' ? path : `${path}?${query}`;
}

/** One page of events at `path` (a `next` from before: the page after it, with its query). */
async function eventPage(call: Call, path: string): Promise<EventPage> {
  const res = await call('GET', path, { retryable: true });
  return { events: (await res.json()) as PlantEvent[], next: nextLink(res.headers.get('link')) };
}

/** Every event from `path` with `q`, page after page through `Link`, newest first. */
async function* eventPages(
  call: Call,
  path: string,
  q: EventPageQuery & { type?: readonly string[] },
): AsyncGenerator<PlantEvent> {
  let next: string | null = eventPath(path, q);
  while (next !== null) {
    const page: EventPage = await eventPage(call, next);
    yield* page.events;
    next = page.next;
  }
}

export class PlantStore {
  private readonly base: string;
  private readonly fetch: typeof fetch;
  private readonly deadlineMs: number;
  private readonly retries: number;

  /** Gardens and their members (CONTRACT.md section 3.2): `store.gardens.create('Greenhouse')`. */
  readonly gardens: Gardens;
  /** Webhook endpoints and their deliveries (CONTRACT.md section 8). */
  readonly webhooks: Webhooks;
  /** Tokens over HTTP (CONTRACT.md section 3.3; scope `tokens:manage`): `store.tokens.create()`. */
  readonly tokens: Tokens;
  /** Search, batch creates and exports (CONTRACT.md section 2, version 4): `store.plants.search('mon')`. */
  readonly plants: Plants;
  /** The trash (CONTRACT.md section 13.2): `for await (const t of store.trash.list())`. */
  readonly trash: Trash;

  constructor(private readonly opts: PlantStoreOptions) {
    this.base = withoutTrailingSlashes(opts.url);
    this.fetch = opts.fetch ?? globalThis.fetch.bind(globalThis);
    this.deadlineMs = opts.deadlineMs ?? 30_000;
    this.retries = opts.retries ?? 4;
    const call: Call = (method, path, o) => this.call(method, path, o);
    this.gardens = new Gardens(call);
    this.webhooks = new Webhooks(call);
    this.tokens = new Tokens(call);
    this.plants = new Plants(call, (q) => this.list(q));
    this.trash = new Trash(call);
  }

  /**
   * Creates a plant: in the caller's home garden, or with `garden` in that one (the caller must be
   * its editor or owner: a viewer gets a PlantStoreError 403 `insufficient_role`). Retried safely
   * under one Idempotency-Key (made here unless given).
   */
  async create(
    plant: PlantCreate,
    opts: { idempotencyKey?: string; garden?: string } = {},
  ): Promise<ListedPlant & { etag: string }> {
    const key = opts.idempotencyKey ?? crypto.randomUUID();
    const path = opts.garden === undefined ? '/plants' : `${gardenPath(opts.garden)}/plants`;
    const res = await this.call('POST', path, {
      body: plant,
      headers: { 'idempotency-key': key },
      retryable: true,
    });
    const id = Number(/\/plants\/(\d+)$/.exec(res.headers.get('location') ?? '')?.[1]);
    return { id, ...((await res.json()) as Plant), etag: res.headers.get('etag') ?? '' };
  }

  /** Who the token in use is: its user, scopes and kind (any valid token; no scope needed). */
  async me(): Promise<Me> {
    const res = await this.call('GET', '/me', { retryable: true });
    return (await res.json()) as Me;
  }

  /** One plant and its ETag; a PlantStoreError with status 404 when there is none the caller may see. */
  async get(id: number): Promise<TaggedPlant> {
    const res = await this.call('GET', `/plants/${plantId(id)}`, { retryable: true });
    return { ...((await res.json()) as Plant), etag: res.headers.get('etag') ?? '' };
  }

  /**
   * Changes one plant by a JSON Merge Patch, only if it is still in the version `ifMatch` names
   * (an ETag from get/create/update, or `*` for any). A PlantStoreError 412
   * (`precondition_failed`) when it has changed since: read it again and reapply. Retried safely
   * under one Idempotency-Key (made here unless given) with the same If-Match: a retry of a change
   * that was applied answers its first 200.
   */
  async update(
    id: number,
    patch: PlantPatch,
    opts: { ifMatch: string; idempotencyKey?: string },
  ): Promise<TaggedPlant> {
    const res = await this.call('PATCH', `/plants/${plantId(id)}`, {
      body: patch,
      headers: {
        'content-type': 'application/merge-patch+json',
        'if-match': opts.ifMatch,
        'idempotency-key': opts.idempotencyKey ?? crypto.randomUUID(),
      },
      retryable: true,
    });
    return { ...((await res.json()) as Plant), etag: res.headers.get('etag') ?? '' };
  }

  /**
   * Deletes one plant (404 when there is none the caller may see); with `ifMatch`, only if it is
   * still in that version (412 otherwise, and it is kept).
   */
  async delete(id: number, opts: { ifMatch?: string } = {}): Promise<void> {
    await this.call('DELETE', `/plants/${plantId(id)}`, {
      retryable: true,
      ...(opts.ifMatch === undefined ? {} : { headers: { 'if-match': opts.ifMatch } }),
    });
  }

  /**
   * One page of plants, with ids (and what `include` asks for), and the path of the next page (null
   * on the last); `next` from a page reads the page after it, with the query it was made with.
   */
  async page<I extends PlantInclude = never>(
    q: PlantQuery<I> & { next?: string | null } = {},
  ): Promise<{ plants: ListedPlant<I>[]; next: string | null }> {
    let path = q.next ?? null;
    if (path === null) {
      const include = ['id', ...new Set(q.include ?? [])];
      const params = new URLSearchParams({ include: include.join(',') });
      if (q.limit !== undefined) params.set('limit', String(q.limit));
      if (q.tag !== undefined) params.set('tag', q.tag);
      if (q.garden !== undefined) params.set('garden', q.garden);
      if (q.q !== undefined) params.set('q', q.q);
      path = `/plants?${params}`;
    }
    const res = await this.call('GET', path, { retryable: true });
    return { plants: (await res.json()) as ListedPlant<I>[], next: nextLink(res.headers.get('link')) };
  }

  /**
   * Every plant the caller may see (of one `garden`, with one `tag`), page after page through
   * `Link`: `for await (const p of store.list({ include: ['garden'] }))`.
   */
  async *list<I extends PlantInclude = never>(q: PlantQuery<I> = {}): AsyncGenerator<ListedPlant<I>> {
    let next: string | null = null;
    do {
      const page: { plants: ListedPlant<I>[]; next: string | null } = await this.page({ ...q, next });
      yield* page.plants;
      next = page.next;
    } while (next !== null);
  }

  /** Every plant of `list(q)`, all pages read, in id order. */
  async all<I extends PlantInclude = never>(q: PlantQuery<I> = {}): Promise<ListedPlant<I>[]> {
    const plants: ListedPlant<I>[] = [];
    for await (const p of this.list(q)) plants.push(p);
    return plants;
  }

  /**
   * The live stream of plant events, as they commit. Resumes after a lost connection with
   * `Last-Event-ID`, missing nothing still kept; ends when `signal` aborts. A 410 (the last event
   * seen is no longer kept) ends it with a PlantStoreError. `onOpen` is called each time the
   * stream is (re)connected.
   */
  async *events(
    opts: { lastEventId?: string; signal?: AbortSignal; onOpen?: () => void } = {},
  ): AsyncGenerator<PlantEvent> {
    let last = opts.lastEventId;
    let failures = 0;
    while (!opts.signal?.aborted) {
      let res: Response;
      try {
        res = await this.fetch(`${this.base}/events`, {
          headers: {
            authorization: `Bearer ${await this.token()}`,
            accept: 'text/event-stream',
            ...(last ? { 'last-event-id': last } : {}),
          },
          ...(opts.signal ? { signal: opts.signal } : {}),
        });
      } catch (err) {
        if (opts.signal?.aborted) return;
        if (++failures > this.retries) throw unreachable(err);
        await sleep(backoff(failures));
        continue;
      }
      if (!res.ok) {
        if (RETRY_STATUS.has(res.status) && ++failures <= this.retries) {
          await res.body?.cancel();
          await sleep(retryAfterMs(res.headers.get('retry-after')) ?? backoff(failures));
          continue;
        }
        throw await refusal(res);
      }
      opts.onOpen?.();
      try {
        for await (const m of sseMessages(res.body!)) {
          failures = 0;
          if (m.id === undefined || m.data === undefined) continue;
          last = m.id;
          yield { id: m.id, ...(JSON.parse(m.data) as components['schemas']['Event']) };
        }
      } catch (err) {
        if (opts.signal?.aborted) return;
        if (++failures > this.retries) throw unreachable(err);
      }
      // The stream ended (the service closed it, or the connection was lost): resume.
      await sleep(backoff(Math.max(1, failures)));
    }
  }

  private async token(): Promise<string> {
    return typeof this.opts.token === 'string' ? this.opts.token : this.opts.token();
  }

  /**
   * One call with retries: network errors, 408, 409 idempotency_key_in_flight, 429, 502, 503 and
   * 504 are tried again with exponential backoff and jitter, or after Retry-After when the service
   * says, within the deadline. Anything else not 2xx is a PlantStoreError. `retryable: 'refused'`
   * (a request that is not safe to repeat) tries again only after a 429 or 503: the service
   * answered and did nothing, so nothing is done twice.
   */
  private async call(method: string, path: string, o: CallOptions): Promise<Response> {
    const deadline = Date.now() + this.deadlineMs;
    for (let attempt = 0; ; attempt++) {
      const left = deadline - Date.now();
      if (left <= 0)
        throw new PlantStoreError(0, 'deadline_exceeded', `no answer within ${this.deadlineMs} ms`);
      let res: Response;
      // A streamed answer's body may take longer than the deadline: only its headers are timed
      // here (its reader bounds each wait for more: readLines).
      const abort = o.streamed ? new AbortController() : undefined;
      const timer =
        abort && setTimeout(() => abort.abort(new DOMException('deadline', 'TimeoutError')), left);
      try {
        res = await this.fetch(`${this.base}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${await this.token()}`,
            ...(o.body === undefined ? {} : { 'content-type': 'application/json' }),
            ...o.headers,
          },
          ...(o.body === undefined ? {} : { body: JSON.stringify(o.body) }),
          ...(o.text === undefined ? {} : { body: o.text }),
          signal: abort?.signal ?? AbortSignal.timeout(left),
        });
      } catch (err) {
        clearTimeout(timer);
        if (o.retryable !== true || attempt >= this.retries) throw unreachable(err);
        await this.wait(backoff(attempt + 1), deadline);
        continue;
      }
      clearTimeout(timer);
      if (res.ok) return res;
      const error = await refusal(res);
      const again =
        o.retryable === 'refused'
          ? res.status === 429 || res.status === 503
          : RETRY_STATUS.has(res.status) ||
            (res.status === 409 && error.code === 'idempotency_key_in_flight');
      if (!o.retryable || !again || attempt >= this.retries) throw error;
      await this.wait(retryAfterMs(res.headers.get('retry-after')) ?? backoff(attempt + 1), deadline, error);
    }
  }

  private async wait(ms: number, deadline: number, error?: PlantStoreError): Promise<void> {
    if (Date.now() + ms > deadline) {
      throw error ?? new PlantStoreError(0, 'deadline_exceeded', `no answer within ${this.deadlineMs} ms`);
    }
    await sleep(ms);
  }
}

interface CallOptions {
  body?: unknown;
  /** A body sent as it is, with its own content-type header (CSV, NDJSON). */
  text?: string | Blob | Uint8Array<ArrayBuffer>;
  /** The answer's body is read as a stream for as long as it takes: the deadline covers its headers only. */
  streamed?: boolean;
  headers?: Record<string, string>;
  /** true: safe to repeat; 'refused': only after a 429 or 503 (the service did nothing); false: never. */
  retryable: boolean | 'refused';
}
type Call = (method: string, path: string, o: CallOptions) => Promise<Response>;

/**
 * The trash (CONTRACT.md section 13.2), as `store.trash`: the plants deleted in the gardens where
 * the caller is an editor or owner, to restore or erase for good while they are kept.
 */
export class Trash {
  constructor(private readonly call: Call) {}

  /**
   * One page of the trash, newest deletion first, and the path of the next page (null on the last);
   * `next` from a page reads the page after it, with the query it was made with.
   */
  async page(q: TrashQuery & { next?: string | null } = {}): Promise<{
    plants: TrashedPlant[];
    next: string | null;
  }> {
    let path = q.next ?? null;
    if (path === null) {
      const params = new URLSearchParams();
      if (q.garden !== undefined) params.set('garden', q.garden);
      if (q.limit !== undefined) params.set('limit', String(q.limit));
      if (q.cursor !== undefined) params.set('cursor', q.cursor);
      path = params.size > 0 ? `/trash?${params}` : '/trash';
    }
    const res = await this.call('GET', path, { retryable: true });
    return { plants: (await res.json()) as TrashedPlant[], next: nextLink(res.headers.get('link')) };
  }

  /**
   * Every trashed plant the caller may restore (of one `garden`), newest deletion first, page after
   * page through `Link`: `for await (const t of store.trash.list({ garden }))`.
   */
  async *list(q: TrashQuery = {}): AsyncGenerator<TrashedPlant> {
    let next: string | null = null;
    do {
      const page: { plants: TrashedPlant[]; next: string | null } = await this.page({ ...q, next });
      yield* page.plants;
      next = page.next;
    } while (next !== null);
  }

  /**
   * Puts a trashed plant back in its garden with a new version, and answers it with its ETag. A
   * PlantStoreError 409 `plant_exists` when a plant has taken its id since (nothing changes); 404
   * when it is in no trash the caller may see; 403 for a viewer. Retried safely under one
   * Idempotency-Key (made here unless given).
   */
  async restore(id: number, opts: { idempotencyKey?: string } = {}): Promise<ListedPlant & { etag: string }> {
    const res = await this.call('POST', `/trash/${plantId(id)}/restore`, {
      headers: { 'idempotency-key': opts.idempotencyKey ?? crypto.randomUUID() },
      retryable: true,
    });
    return { id, ...((await res.json()) as Plant), etag: res.headers.get('etag') ?? '' };
  }

  /** Erases a trashed plant for good (404 when it is in no trash the caller may see). */
  async purge(id: number): Promise<void> {
    await this.call('DELETE', `/trash/${plantId(id)}`, { retryable: true });
  }
}

/**
 * Search, batch creates and exports (CONTRACT.md section 2, version 4), as `store.plants`. A bad
 * query or batch is a PlantStoreError 400 whose `details` name each bad field (`/q`, `/plants/3/name`,
 * `/rows/4/name`); an id that exists is a 409 `plant_exists`, and nothing of the batch is created.
 */
export class Plants {
  constructor(
    private readonly call: Call,
    private readonly lister: (q: PlantQuery<PlantInclude>) => AsyncGenerator<ListedPlant<PlantInclude>>,
  ) {}

  /**
   * The plants whose name has a word starting with each term of `text` (case and accents ignored),
   * every page read through `Link`, in id order: `for await (const p of store.plants.search('mon del'))`.
   */
  search<I extends PlantInclude = never>(
    text: string,
    q: Omit<PlantQuery<I>, 'q'> = {},
  ): AsyncGenerator<ListedPlant<I>> {
    return this.lister({ ...q, q: text }) as AsyncGenerator<ListedPlant<I>>;
  }

  /**
   * The events of plant `id` still kept (a deleted plant's too), newest first, each with its id,
   * actor and request id, every page read through `Link`: `for await (const e of
   * store.plants.history(42))`. Only gardens the caller is a member of now; none: 404 `plant_not_found`.
   */
  history(id: number, q: EventPageQuery = {}): AsyncGenerator<PlantEvent> {
    return eventPages(this.call, `/plants/${id}/history`, q);
  }

  /**
   * One page of plant `id`'s history, newest first, and the path of the next page (null on the
   * last): `historyPage(42, { next })` reads the page after the one that gave `next`.
   */
  historyPage(id: number, q: EventPageQuery & { next?: string | null } = {}): Promise<EventPage> {
    return eventPage(this.call, q.next ?? eventPath(`/plants/${id}/history`, q));
  }

  /**
   * Keeps a copy of the plants (CONTRACT.md section 13.4): from `position` (a `next` kept from
   * before; none: every plant the caller sees, from scratch) the pages of changes until the copy is
   * up to date, then, as the generator's return value, the position to keep for next time:
   *
   *     const sync = store.plants.sync(saved);
   *     for (let r = await sync.next(); ; r = await sync.next()) {
   *       if (r.done) { saved = r.value; break; }
   *       if (r.value.restarted) copy.clear();
   *       for (const c of r.value.changes) c.op === 'upsert' ? copy.set(c.id, c.plant) : copy.delete(c.id);
   *     }
   *
   * A position older than the events the service keeps (410 `changes_expired`) starts again from
   * scratch by itself, and its first page says so (`restarted`). Another 4xx (a position of another
   * user or garden: 400) is a PlantStoreError.
   */
  async *sync(position: string | null = null, q: SyncQuery = {}): AsyncGenerator<SyncPage, string> {
    let since = position;
    let restarted = false;
    for (;;) {
      const params = new URLSearchParams();
      if (since !== null) params.set('since', since);
      if (q.limit !== undefined) params.set('limit', String(q.limit));
      if (q.garden !== undefined) params.set('garden', q.garden);
      const query = params.toString();
      let answer: ChangesAnswer;
      try {
        const res = await this.call('GET', `/plants/changes${query ? `?${query}` : ''}`, { retryable: true });
        answer = (await res.json()) as ChangesAnswer;
      } catch (err) {
        if (!(err instanceof PlantStoreError && err.status === 410) || since === null) throw err;
        since = null;
        restarted = true;
        continue;
      }
      yield { changes: answer.changes, restarted, next: answer.next, more: answer.more };
      restarted = false;
      since = answer.next;
      if (!answer.more) return answer.next;
    }
  }

  /**
   * Creates 1 … 1000 plants at once, all or none, each with its own event: JSON plants, or a CSV or
   * NDJSON text. Plants without a garden go to `garden`, else to the caller's home garden; `newIds`
   * ignores the ids given (re-importing an export). Retried safely under one Idempotency-Key (made
   * here unless given).
   */
  async batch(
    plants: BatchInput,
    opts: { garden?: string; newIds?: boolean; idempotencyKey?: string } = {},
  ): Promise<BatchCreated> {
    const params = new URLSearchParams();
    if (opts.garden !== undefined) params.set('garden', opts.garden);
    if (opts.newIds) params.set('ids', 'drop');
    const path = `/plants/batch${params.size ? `?${params}` : ''}`;
    const headers = { 'idempotency-key': opts.idempotencyKey ?? crypto.randomUUID() };
    const body: Pick<CallOptions, 'body' | 'text' | 'headers'> = Array.isArray(plants)
      ? { body: { plants }, headers }
      : 'csv' in plants
        ? { text: plants.csv, headers: { ...headers, 'content-type': 'text/csv; charset=utf-8' } }
        : {
            text: plants.ndjson,
            headers: { ...headers, 'content-type': 'application/x-ndjson; charset=utf-8' },
          };
    const res = await this.call('POST', path, { ...body, retryable: true });
    return (await res.json()) as BatchCreated;
  }

  /**
   * Every plant a list with these filters shows, from one snapshot of the store, read as the
   * service streams it (memory does not grow with the plants): `for await (const p of store.plants.export())`.
   */
  async *export(q: ExportQuery = {}): AsyncGenerator<ExportedPlant> {
    for await (const line of this.exportText(q, 'ndjson')) {
      if (line.trim() !== '') yield JSON.parse(line) as ExportedPlant;
    }
  }

  /**
   * The export as the service writes it, line by line (each with its line end): NDJSON, or CSV
   * with its UTF-8 byte order mark (U+FEFF, first in the first line, so a file written from these
   * lines opens right in Excel) and `opts.delimiter` between cells (`,` by default; `;` for Excel
   * where the decimal separator is a comma; or a tab).
   */
  async *exportText(
    q: ExportQuery = {},
    format: 'ndjson' | 'csv' = 'csv',
    opts: { delimiter?: CsvDelimiter } = {},
  ): AsyncGenerator<string> {
    const params = new URLSearchParams({ format });
    if (opts.delimiter !== undefined) params.set('delimiter', opts.delimiter);
    if (q.tag !== undefined) params.set('tag', q.tag);
    if (q.garden !== undefined) params.set('garden', q.garden);
    if (q.q !== undefined) params.set('q', q.q);
    const res = await this.call('GET', `/plants/export?${params}`, { retryable: true, streamed: true });
    yield* readLines(res.body!, EXPORT_IDLE_MS);
  }
}

/** How long an export's reader waits for more of the body before it gives up. */
const EXPORT_IDLE_MS = 60_000;

/**
 * The lines of a body as they arrive (each with its `\n`; the last one as it ends), never the whole
 * body at once. An export's cells hold no line breaks (names and tags have no control characters),
 * so each line is one record. Each wait for more is bounded by `idleMs`.
 */
async function* readLines(body: ReadableStream<Uint8Array>, idleMs: number): AsyncGenerator<string> {
  const reader = body.getReader();
  // Keeps a byte order mark: the lines are the body as it was sent.
  const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  let rest = '';
  try {
    for (;;) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const idle = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(new PlantStoreError(0, 'deadline_exceeded', `no more of the export within ${idleMs} ms`)),
          idleMs,
        );
      });
      const { done, value } = await Promise.race([reader.read(), idle]).finally(() => clearTimeout(timer));
      if (done) break;
      rest += decoder.decode(value, { stream: true });
      let at = rest.indexOf('\n');
      while (at >= 0) {
        yield rest.slice(0, at + 1);
        rest = rest.slice(at + 1);
        at = rest.indexOf('\n');
      }
    }
    rest += decoder.decode();
    if (rest !== '') yield rest;
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/**
 * Gardens and their members (CONTRACT.md section 3.2), as `store.gardens`. A garden the caller is not
 * a member of is a PlantStoreError 404 (`garden_not_found`), as one that does not exist; a role too
 * low for the request is a 403 (`insufficient_role`); the rules' refusals are 409s (`home_garden`,
 * `last_owner`, `garden_not_empty`, `too_many_gardens`, `too_many_members`).
 */
export class Gardens {
  constructor(private readonly call: Call) {}

  /** The caller's gardens, its home garden first (made when first needed), then by creation. */
  async list(): Promise<Garden[]> {
    return (await (await this.call('GET', '/gardens', { retryable: true })).json()) as Garden[];
  }

  /**
   * Makes a garden with the caller as its owner. Not repeated after a lost answer (that could make
   * two): only after a 429 or 503, when the service made nothing.
   */
  async create(name: string): Promise<Garden> {
    const res = await this.call('POST', '/gardens', { body: { name }, retryable: 'refused' });
    return (await res.json()) as Garden;
  }

  /** One garden, with the caller's role in it. */
  async get(gid: string): Promise<Garden> {
    return (await (await this.call('GET', gardenPath(gid), { retryable: true })).json()) as Garden;
  }

  /** Renames a garden (owners only). */
  async rename(gid: string, name: string): Promise<Garden> {
    const res = await this.call('PATCH', gardenPath(gid), { body: { name }, retryable: true });
    return (await res.json()) as Garden;
  }

  /** Deletes an empty garden (owners only; a garden with plants: 409 `garden_not_empty`). */
  async delete(gid: string): Promise<void> {
    await this.call('DELETE', gardenPath(gid), { retryable: true });
  }

  /**
   * The garden's events still kept, plants' and members', newest first (of `type` only, when
   * given), every page read through `Link`, to any member: `for await (const e of
   * store.gardens.activity(gid, { type: ['plant.deleted'] }))`.
   */
  activity(
    gid: string,
    q: EventPageQuery & { type?: readonly EventType[] } = {},
  ): AsyncGenerator<PlantEvent> {
    return eventPages(this.call, `${gardenPath(gid)}/activity`, q);
  }

  /**
   * One page of the garden's activity, newest first, and the path of the next page (null on the
   * last): `activityPage(gid, { next })` reads the page after the one that gave `next`.
   */
  activityPage(
    gid: string,
    q: EventPageQuery & { type?: readonly EventType[]; next?: string | null } = {},
  ): Promise<EventPage> {
    return eventPage(this.call, q.next ?? eventPath(`${gardenPath(gid)}/activity`, q));
  }

  /** The garden's members, to any member. */
  async members(gid: string): Promise<Member[]> {
    const res = await this.call('GET', `${gardenPath(gid)}/members`, { retryable: true });
    return (await res.json()) as Member[];
  }

  /**
   * Adds `user` to the garden with `role` (default viewer), or changes its role (owners only);
   * `created` says which (a retry after a lost answer finds it added: `created` false).
   */
  async share(
    gid: string,
    user: string,
    role: Role = 'viewer',
  ): Promise<{ member: Member; created: boolean }> {
    const res = await this.call('PUT', memberPath(gid, user), { body: { role }, retryable: true });
    return { member: (await res.json()) as Member, created: res.status === 201 };
  }

  /** Removes `user` from the garden (owners; any member may remove itself: leaving). */
  async unshare(gid: string, user: string): Promise<void> {
    await this.call('DELETE', memberPath(gid, user), { retryable: true });
  }
}

/** Webhook endpoints (CONTRACT.md section 8), as `store.webhooks`. Another user's endpoint is a 404. */
export class Webhooks {
  constructor(private readonly call: Call) {}

  /** The caller's endpoints, without their secrets. */
  async list(): Promise<Webhook[]> {
    return (await (await this.call('GET', '/webhooks', { retryable: true })).json()) as Webhook[];
  }

  /**
   * Registers an endpoint; the answer carries its signing secret. Not repeated after a lost answer
   * (that could make two): only after a 429 or 503, when the service made nothing. A URL refused
   * by the address policy is a 400 (`invalid_webhook_url`); a user's 21st endpoint a 409
   * (`too_many_webhooks`).
   */
  async create(endpoint: WebhookCreate): Promise<WebhookWithSecret> {
    const res = await this.call('POST', '/webhooks', { body: endpoint, retryable: 'refused' });
    return (await res.json()) as WebhookWithSecret;
  }

  /** One endpoint, its secret included. */
  async get(id: string): Promise<WebhookWithSecret> {
    const res = await this.call('GET', webhookPath(id), { retryable: true });
    return (await res.json()) as WebhookWithSecret;
  }

  async delete(id: string): Promise<void> {
    await this.call('DELETE', webhookPath(id), { retryable: true });
  }

  /** A new signing secret (the old one keeps signing beside it for 24 h). Not repeated after a lost answer. */
  async rotateSecret(id: string): Promise<WebhookWithSecret> {
    const res = await this.call('POST', `${webhookPath(id)}/rotate-secret`, { retryable: 'refused' });
    return (await res.json()) as WebhookWithSecret;
  }

  /** One page of the endpoint's delivery attempts, newest first, and the path of the next (null on the last). */
  async deliveries(
    id: string,
    q: { limit?: number; next?: string | null } = {},
  ): Promise<{ attempts: DeliveryAttempt[]; next: string | null }> {
    const path = q.next ?? `${webhookPath(id)}/deliveries${q.limit === undefined ? '' : `?limit=${q.limit}`}`;
    const res = await this.call('GET', path, { retryable: true });
    return { attempts: (await res.json()) as DeliveryAttempt[], next: nextLink(res.headers.get('link')) };
  }

  /** Re-sends every event since `since` that the endpoint has not acknowledged; the count queued. */
  async recover(id: string, since: Date | string): Promise<number> {
    const body = { since: typeof since === 'string' ? since : since.toISOString() };
    const res = await this.call('POST', `${webhookPath(id)}/recover`, { body, retryable: true });
    return ((await res.json()) as { queued: number }).queued;
  }
}

/**
 * Tokens over HTTP (CONTRACT.md section 3.3), as `store.tokens`; every call needs the scope
 * `tokens:manage` (else a PlantStoreError 403 `insufficient_scope`). A token never gets more than
 * its maker holds: a scope the caller lacks, another user (without plants:admin) or a lifetime past
 * the caller's own is a 403 `scope_not_held`. Another user's token is a 404 `token_not_found`, as
 * one that does not exist (to an admin, it is visible).
 */
export class Tokens {
  constructor(private readonly call: Call) {}

  /**
   * Makes a token (default: the caller's own user, `plants:read plants:write`, as long-lived as
   * the caller); the answer carries its secret in `token`, this once. Not repeated after a lost
   * answer (that could make two): only after a 429 or 503, when the service made nothing.
   */
  async create(req: TokenCreate = {}): Promise<CreatedToken> {
    const res = await this.call('POST', '/tokens', { body: req, retryable: 'refused' });
    return (await res.json()) as CreatedToken;
  }

  /**
   * One page of tokens, newest first (the caller's own; an admin's: every user's, or `user`'s), and
   * the path of the next page (null on the last); `next` from a page reads the page after it, with
   * the query it was made with. Never a secret.
   */
  async list(
    q: TokenQuery & { next?: string | null } = {},
  ): Promise<{ tokens: Token[]; next: string | null }> {
    let path = q.next ?? null;
    if (path === null) {
      const params = new URLSearchParams();
      if (q.user !== undefined) params.set('user', q.user);
      if (q.limit !== undefined) params.set('limit', String(q.limit));
      if (q.cursor !== undefined) params.set('cursor', q.cursor);
      const query = params.toString();
      path = query === '' ? '/tokens' : `/tokens?${query}`;
    }
    const res = await this.call('GET', path, { retryable: true });
    return { tokens: (await res.json()) as Token[], next: nextLink(res.headers.get('link')) };
  }

  /** Every token of `list(q)`, all pages read through `Link`, newest first. */
  async all(q: Omit<TokenQuery, 'cursor'> = {}): Promise<Token[]> {
    const tokens: Token[] = [];
    let next: string | null = null;
    do {
      const page: { tokens: Token[]; next: string | null } = await this.list({ ...q, next });
      tokens.push(...page.tokens);
      next = page.next;
    } while (next !== null);
    return tokens;
  }

  /** One token, without its secret. */
  async get(id: string): Promise<Token> {
    return (await (await this.call('GET', tokenPath(id), { retryable: true })).json()) as Token;
  }

  /**
   * Revokes a token (the one in use included): it stops working everywhere within 5 seconds.
   * Revoking a revoked token succeeds again, so a retry after a lost answer is safe — except for
   * the token in use, whose retry is refused (401) because the first attempt worked.
   */
  async revoke(id: string): Promise<void> {
    await this.call('DELETE', tokenPath(id), { retryable: true });
  }
}

function webhookPath(id: string): string {
  if (typeof id !== 'string' || id === '') throw new TypeError(`not a webhook id: ${JSON.stringify(id)}`);
  return `/webhooks/${encodeURIComponent(id)}`;
}

function tokenPath(id: string): string {
  if (typeof id !== 'string' || id === '') throw new TypeError(`not a token id: ${JSON.stringify(id)}`);
  return `/tokens/${encodeURIComponent(id)}`;
}

function gardenPath(gid: string): string {
  if (typeof gid !== 'string' || gid === '') throw new TypeError(`not a garden id: ${JSON.stringify(gid)}`);
  return `/gardens/${encodeURIComponent(gid)}`;
}

function memberPath(gid: string, user: string): string {
  if (typeof user !== 'string' || user === '') throw new TypeError(`not a user: ${JSON.stringify(user)}`);
  return `${gardenPath(gid)}/members/${encodeURIComponent(user)}`;
}

function plantId(id: number): string {
  if (!Number.isSafeInteger(id) || id < 1) throw new TypeError(`not a plant id: ${id}`);
  return String(id);
}

/** 200 ms, 400 ms, 800 ms … up to 5 s, each with up to half again of jitter. */
const backoff = (n: number) => Math.min(5_000, 100 * 2 ** n) * (1 + Math.random() / 2);

function unreachable(err: unknown): PlantStoreError {
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
  return new PlantStoreError(
    0,
    'unreachable',
    `the service could not be reached: ${cause?.code ?? cause?.message ?? (err as Error)?.message ?? err}`,
  );
}

async function refusal(res: Response): Promise<PlantStoreError> {
  const requestId = res.headers.get('x-request-id');
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as ErrorBody;
    if (typeof body.code === 'string' && typeof body.message === 'string') {
      return new PlantStoreError(res.status, body.code, body.message, body.details, requestId);
    }
  } catch {
    // Not the contract's error body (a proxy's page, say): described by its status.
  }
  return new PlantStoreError(
    res.status,
    `http_${res.status}`,
    `HTTP ${res.status} ${res.statusText}`,
    undefined,
    requestId,
  );
}

// A message longer than this is no event of the service's: the stream is dropped (and resumed).
const MAX_SSE_MESSAGE = 1 << 20;

/**
 * Server-Sent Events messages from a response body, as the WHATWG rules read them (by
 * eventsource-parser: a line end split across chunks, CR LF included, is still one line end).
 */
export async function* sseMessages(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<{ id?: string; event?: string; data?: string }> {
  const reader = body
    .pipeThrough(new TextDecoderStream() as unknown as ReadableWritablePair<string, Uint8Array>)
    .pipeThrough(new EventSourceParserStream({ maxBufferSize: MAX_SSE_MESSAGE, onError: 'terminate' }))
    .getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      const { id, event, data } = value;
      yield { ...(id === undefined ? {} : { id }), ...(event === undefined ? {} : { event }), data };
    }
  } finally {
    // Cancelling the reader cancels the body beneath it, which closes the connection.
    await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}

const enc = new TextEncoder();
const b64 = (bytes: ArrayBuffer) => btoa(String.fromCharCode(...new Uint8Array(bytes)));
const unb64 = (s: string) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));

async function hmac(secret: string, content: string): Promise<string> {
  const key = await crypto.subtle.importKey(
    'raw',
    unb64(secret.replace(/^whsec_/, '')),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign'],
  );
  return b64(await crypto.subtle.sign('HMAC', key, enc.encode(content)));
}

/** Signs a delivery as Standard Webhooks 1.0 does: the `webhook-signature` header's value. */
export async function signWebhook(
  secret: string,
  id: string,
  timestamp: number,
  body: string,
): Promise<string> {
  return `v1,${await hmac(secret, `${id}.${timestamp}.${body}`)}`;
}

/**
 * Verifies a webhook delivery (Standard Webhooks 1.0): one of its signatures is the secret's, and
 * its timestamp is within `toleranceS` (default 5 minutes) of now. Returns the event; throws a
 * PlantStoreError (`invalid_signature`) otherwise. Keep the raw body: verify before parsing.
 */
export async function verifyWebhook(
  secret: string,
  headers: Record<string, string | string[] | undefined> | Headers,
  body: string,
  opts: { toleranceS?: number; now?: number } = {},
): Promise<PlantEvent> {
  const get = (name: string) => {
    const v = headers instanceof Headers ? headers.get(name) : headers[name];
    return Array.isArray(v) ? v[0] : (v ?? undefined);
  };
  const id = get('webhook-id');
  const ts = Number(get('webhook-timestamp'));
  const signatures = get('webhook-signature');
  const bad = (why: string) => new PlantStoreError(400, 'invalid_signature', why);
  if (!id || !signatures || !Number.isInteger(ts)) throw bad('missing webhook-id, -timestamp or -signature');
  const now = Math.floor((opts.now ?? Date.now()) / 1000);
  if (Math.abs(now - ts) > (opts.toleranceS ?? 300)) throw bad('timestamp outside the tolerance');
  const expected = (await hmac(secret, `${id}.${ts}.${body}`)).trim();
  const match = signatures
    .split(' ')
    .map((s) => s.split(','))
    .some(([v, sig]) => v === 'v1' && sig !== undefined && timingSafeEqual(sig, expected));
  if (!match) throw bad('no signature matches the secret');
  return { id, ...(JSON.parse(body) as components['schemas']['Event']) };
}

function timingSafeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/**
 * A token provider for JWT issuers (OAuth 2.0 client credentials, RFC 6749 4.4): fetches an access
 * token from the issuer's token endpoint (found by discovery when only `issuer` is given), keeps
 * it until 30 s before it expires, and shares one fetch between concurrent callers.
 */
export function clientCredentials(o: {
  issuer?: string;
  tokenEndpoint?: string;
  clientId: string;
  clientSecret: string;
  scope?: string;
  /** RFC 8707 resource indicator: the audience the token is for. */
  resource?: string;
  fetch?: typeof fetch;
}): () => Promise<string> {
  const f = o.fetch ?? globalThis.fetch.bind(globalThis);
  let cached: { token: string; until: number } | null = null;
  let inflight: Promise<string> | null = null;
  const endpoint = async (): Promise<string> => {
    if (o.tokenEndpoint) return o.tokenEndpoint;
    if (!o.issuer) throw new TypeError('clientCredentials needs issuer or tokenEndpoint');
    const res = await f(`${withoutTrailingSlashes(o.issuer)}/.well-known/openid-configuration`);
    if (!res.ok) throw await refusal(res);
    return ((await res.json()) as { token_endpoint: string }).token_endpoint;
  };
  const fetchToken = async (): Promise<string> => {
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    if (o.scope) form.set('scope', o.scope);
    if (o.resource) form.set('resource', o.resource);
    const res = await f(await endpoint(), {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${btoa(`${encodeURIComponent(o.clientId)}:${encodeURIComponent(o.clientSecret)}`)}`,
      },
      body: form,
    });
    if (!res.ok) throw await refusal(res);
    const body = (await res.json()) as { access_token: string; expires_in?: number };
    cached = { token: body.access_token, until: Date.now() + ((body.expires_in ?? 300) - 30) * 1000 };
    return body.access_token;
  };
  return async () => {
    if (cached && cached.until > Date.now()) return cached.token;
    inflight ??= fetchToken().finally(() => {
      inflight = null;
    });
    return inflight;
  };
}
