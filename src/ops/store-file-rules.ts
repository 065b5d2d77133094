import { isAdmin } from '../access/policy.js';
import { isGardenId } from '../gardens/id.js';
import { RECORD_KINDS, type RecordKind, type StoreRecord } from '../schemas/store-file.js';
import { lineData } from '../store/dump-rows.js';

// What the records of an export file must say of each other, beyond each record's own schema
// (src/schemas/store-file.ts, the API's own field rules): the kinds in the exporter's order, so
// that what a record refers to came before it; every garden, endpoint and admin token a record
// names is in the file; an endpoint's reach over every garden is tied to a credential, as
// policy.endpointReach makes it; and the counters are at least the ids and versions the file
// holds. The trailer's checksum only tells an accident from a whole file: anyone can recompute
// it, so these are what stand between an edited file and the store.

const ORDER = new Map<RecordKind, number>(RECORD_KINDS.map((k, i) => [k, i]));

/** Checks records one at a time in the file's order; each answer is the broken rule, or null. */
export class StoreFileRules {
  private last = 0;
  private readonly gardens = new Set<string>();
  private readonly adminTokens = new Map<string, string>();
  private readonly tokens = new Set<string>();
  private readonly endpoints = new Set<string>();
  private topPlant = 0;
  private topVersion = 0;
  private counted = false;

  /** The rule `r` breaks given the records before it, or null. */
  check(r: StoreRecord): string | null {
    const at = ORDER.get(r.kind)!;
    if (at < this.last) {
      return `out of order: a ${r.kind} record after the ${RECORD_KINDS[this.last]} records (the order is ${RECORD_KINDS.join(', ')})`;
    }
    this.last = at;
    switch (r.kind) {
      case 'garden':
        if (!isGardenId(r.id)) return `${r.id} is not a garden id (gdn_ and 24 hex digits)`;
        this.gardens.add(r.id);
        return null;
      case 'member':
      case 'plant':
      case 'trash':
        if (!this.gardens.has(r.garden)) return `its garden ${r.garden} is not in the file`;
        if (r.kind !== 'member') {
          this.topPlant = Math.max(this.topPlant, r.id);
          this.topVersion = Math.max(this.topVersion, r.version);
        }
        return null;
      case 'token':
        this.tokens.add(r.id);
        if (isAdmin(r.scopes)) this.adminTokens.set(r.id, r.user);
        return null;
      case 'webhook':
        this.endpoints.add(r.id);
        return reachRule(r, this.tokens, this.adminTokens);
      case 'delivery':
        return this.endpoints.has(r.endpoint) ? null : `its endpoint ${r.endpoint} is not in the file`;
      case 'event':
        if (lineData(r) !== null) return null;
        return r.type.startsWith('member.')
          ? `a ${r.type} event needs member and no plant`
          : `a ${r.type} event needs plant and no member`;
      case 'counters':
        if (this.counted) return 'a second counters record';
        this.counted = true;
        if (r.plantId < this.topPlant) return `plantId ${r.plantId} is below plant ${this.topPlant}`;
        if (r.version < this.topVersion)
          return `version ${r.version} is below a plant's version ${this.topVersion}`;
        return null;
      default:
        return null;
    }
  }

  /** The rule the file as a whole breaks once every record is read, or null. */
  end(): string | null {
    return this.counted ? null : 'no counters record';
  }
}

/** An endpoint's admin reach as policy.endpointReach records it: bounded by a token of its owner's or an expiry. */
function reachRule(
  r: Extract<StoreRecord, { kind: 'webhook' }>,
  tokens: ReadonlySet<string>,
  adminTokens: ReadonlyMap<string, string>,
): string | null {
  if (!r.admin) {
    return r.adminToken === null && r.adminUntil === null
      ? null
      : 'adminToken and adminUntil are set on an endpoint that is not admin';
  }
  if (r.adminToken === null) {
    return r.adminUntil === null
      ? 'an admin endpoint tied to no credential (adminToken and adminUntil are both null)'
      : null;
  }
  if (!tokens.has(r.adminToken)) return `its admin token ${r.adminToken} is not in the file`;
  const user = adminTokens.get(r.adminToken);
  if (user === undefined) return `its admin token ${r.adminToken} does not hold plants:admin`;
  return user === r.owner ? null : `its admin token ${r.adminToken} is not its owner's (${r.owner})`;
}
