import { randomBytes } from 'node:crypto';
import { endpointReach } from '../access/policy.js';
import { AppError, BadRequestError, ConflictError } from '../errors.js';
import { type Caller, isAdmin } from '../identity/caller.js';
import { idCursor, type Page, pageOf } from '../paging.js';
import type {
  AttemptRecord,
  Change,
  EndpointRecord,
  EndpointRefusal,
  EventType,
  Store,
} from '../store/store.js';
import { EVENT_TYPES, MAX_ENDPOINTS_PER_USER } from '../store/store.js';
import { checkWebhookTarget, type Resolver } from './outbound.js';
import { newWebhookSecret } from './signing.js';

/** After a rotation the old secret keeps signing this long, beside the new one. */
export const SECRET_OVERLAP_MS = 24 * 3_600_000;

const notFound = () => new AppError(404, 'not_found', 'webhook endpoint not found');

/** What each refusal of an endpoint write answers. */
function refusal(why: EndpointRefusal): AppError {
  switch (why) {
    case 'missing':
      return notFound();
    case 'too_many_endpoints':
      return new ConflictError(
        'too_many_webhooks',
        `a user may have at most ${MAX_ENDPOINTS_PER_USER} webhook endpoints: delete one first`,
      );
  }
}

const ok = <T>(r: Change<T, EndpointRefusal>): T => {
  if ('refused' in r) throw refusal(r.refused);
  return r.ok;
};

export interface NewEndpoint {
  url: string;
  events?: EventType[];
  description?: string | null;
}

// A deliveries cursor is bound to the caller and the endpoint, in the form a plant list's cursor
// for a tag has, which is how the cursors clients hold were made.
const deliveries = (user: string, id: string) => `${user}\n+webhook-deliveries:${id}`;

/** Webhook endpoints: who may see and change them, URL policy, secrets, the deliveries log. No HTTP. */
export class WebhookService {
  constructor(
    private readonly store: Store,
    private readonly opts: {
      allowPrivate: boolean;
      now?: () => Date;
      /** Resolves host names (tests map names to addresses of their own). */
      resolver?: Resolver;
      /** How long a host name may take to resolve at creation. */
      resolveMs?: number;
    },
  ) {}

  private now(): Date {
    return this.opts.now?.() ?? new Date();
  }

  /**
   * A new endpoint of the caller's. Made with plants:admin, it receives every user's events only
   * while the caller's credential is valid: it records which (a built-in token's id, its expiry or
   * a JWT's exp). A credential that could never be bounded (a JWT without exp) gives no such reach.
   */
  async create(caller: Caller, body: NewEndpoint): Promise<EndpointRecord> {
    const checked = await checkWebhookTarget(body.url, {
      allowPrivate: this.opts.allowPrivate,
      ...(this.opts.resolver ? { resolver: this.opts.resolver } : {}),
      ...(this.opts.resolveMs !== undefined ? { timeoutMs: this.opts.resolveMs } : {}),
    });
    if (!checked.ok) {
      throw new BadRequestError('invalid_webhook_url', `url is refused: ${checked.reason}`, [
        { field: '/url', message: checked.reason },
      ]);
    }
    const endpoint: EndpointRecord = {
      id: `whk_${randomBytes(12).toString('base64url')}`,
      owner: caller.user,
      ...endpointReach(caller),
      url: body.url,
      events: body.events ? EVENT_TYPES.filter((t) => body.events!.includes(t)) : [...EVENT_TYPES],
      description: body.description ?? null,
      secret: newWebhookSecret(),
      previousSecret: null,
      previousSecretUntil: null,
      status: 'enabled',
      disabledReason: null,
      createdAt: this.now(),
      lastSuccessAt: null,
      failingSince: null,
    };
    ok(await this.store.insertEndpoint(endpoint));
    return endpoint;
  }

  /** The caller's endpoints (everyone's for plants:admin), oldest first. */
  list(caller: Caller): Promise<EndpointRecord[]> {
    return this.store.listEndpoints(isAdmin(caller) ? null : caller.user);
  }

  /** The endpoint, if the caller may see it; 404 otherwise, whether or not it exists. */
  async get(caller: Caller, id: string): Promise<EndpointRecord> {
    const e = await this.store.getEndpoint(id);
    if (!e || (e.owner !== caller.user && !isAdmin(caller))) throw notFound();
    return e;
  }

  async remove(caller: Caller, id: string): Promise<void> {
    await this.get(caller, id);
    ok(await this.store.deleteEndpoint(id));
  }

  /** A new secret; the old one keeps signing beside it for 24 h. */
  async rotate(caller: Caller, id: string): Promise<EndpointRecord> {
    const e = await this.get(caller, id);
    const now = this.now();
    return ok(
      await this.store.updateEndpoint(id, {
        secret: newWebhookSecret(),
        previousSecret: e.secret,
        previousSecretUntil: new Date(now.getTime() + SECRET_OVERLAP_MS),
      }),
    );
  }

  async attempts(
    caller: Caller,
    id: string,
    q: { limit: number; cursor?: string },
  ): Promise<Page<AttemptRecord>> {
    await this.get(caller, id);
    const listing = deliveries(caller.user, id);
    const before = q.cursor === undefined ? null : String(idCursor.decode(q.cursor, listing));
    const rows = await this.store.listAttempts(id, { limit: q.limit + 1, beforeId: before });
    return pageOf(rows, q.limit, (last) => idCursor.encode(Number(last.id), listing));
  }

  /** Re-sends every event since `since` that the endpoint has not acknowledged; enables it again. */
  async recover(caller: Caller, id: string, since: Date): Promise<number> {
    const e = await this.get(caller, id);
    if (e.status === 'disabled')
      await this.store.updateEndpoint(id, { status: 'enabled', disabledReason: null, failingSince: null });
    return this.store.recoverDeliveries(id, since, this.now());
  }
}
