import type { Actor, Role } from '../../access/policy.js';
import type { Change } from './change.js';
import type { NewEvent } from './events.js';
import type { Membership } from './gardens.js';
import type { IdempotencyRef } from './idempotency.js';
import type { Trashing } from './trash.js';

// Plants: their records, changes and list pages.

/** A plant as the store keeps it. `tag` is null when absent; `owner` is who created it. */
export interface PlantRecord {
  id: number;
  owner: string;
  /** The garden it belongs to (never changes): its members decide who sees and changes it. */
  garden: string;
  name: string;
  tag: string | null;
}

/** A plant as a list page shows it (its creator is not read). */
export interface PagePlant {
  id: number;
  garden: string;
  name: string;
  tag: string | null;
  version?: number;
}

/**
 * A plant with its version: a positive integer the store gives it at its creation and anew at each
 * change, never given twice in a store (so a plant re-created under a deleted plant's id never
 * repeats a version, and an ETag made from it never repeats either).
 */
export interface VersionedPlant extends PlantRecord {
  version: number;
}

/** A JSON Merge Patch of a plant, checked: a field present is to be set (tag null: removed). */
export interface PlantPatch {
  name?: string;
  tag?: string | null;
}

/**
 * Why a plant write wrote nothing: `missing` no such plant, or one the actor may not see;
 * `no_garden` the garden to create in does not exist or the creator is no member of it;
 * `forbidden` the actor is only a viewer of the garden; `exists` a plant has the id asked for;
 * `mismatch` the plant is in none of the versions asked for. Each is checked in the write's own
 * transaction.
 */
export type PlantRefusal = 'missing' | 'no_garden' | 'forbidden' | 'exists' | 'mismatch';

export type CreateResult = Change<VersionedPlant, 'exists' | 'no_garden' | 'forbidden'>;

export type UpdateResult =
  /** Applied; `changed` is false for a patch that changed nothing (no new version, no event). */
  | Change<{ plant: VersionedPlant; changed: boolean }, 'missing' | 'forbidden'>
  /** The plant's version is none of `ifVersions`: nothing changed; the plant as it is. */
  | { refused: 'mismatch'; current: VersionedPlant };

export type DeleteResult = Change<true, 'missing' | 'forbidden' | 'mismatch'>;

export interface NewPlant {
  /** null: the store assigns the next id. */
  id: number | null;
  owner: string;
  /** The garden it goes into. */
  garden: string;
  /** Made by plants:admin: no role in the garden is needed (otherwise owner must be its editor or owner). */
  admin?: boolean;
  name: string;
  tag: string | null;
}

export interface PageQuery {
  /**
   * The gardens whose plants to list, as one page in id order across them all (each garden read
   * along its own index and merged, never a scan of every visible row); null: every plant (admin).
   */
  gardens: string[] | null;
  tag: string | null;
  /** Return ids strictly greater than this. */
  afterId: number;
  limit: number;
  /** Also each plant's version (read in the same snapshot as the page). */
  withVersion?: boolean;
  /**
   * Search (contract 2's `q`): only plants each of whose terms is a prefix of a word of their name,
   * the terms and the words folded by plants/search-text.ts. Read along the engine's word index,
   * never by reading every visible plant.
   */
  terms?: string[];
}

/** What an export reads: the plants a list with these filters shows, every page of them. */
export type ExportQuery = Omit<PageQuery, 'afterId' | 'limit' | 'withVersion'>;

/**
 * A batch create's outcome: every plant created (in input order), or nothing, because a plant
 * with one of the ids exists (`id`: the first found) or a garden refused its creator (`garden`).
 */
export type BatchCreateResult =
  | { ok: VersionedPlant[] }
  | { refused: 'exists'; id: number }
  | { refused: 'no_garden' | 'forbidden'; garden: string };

/**
 * A page of a list stays exact while `reorder` is unchanged, and a last page also while `top` is:
 * `reorder` moves when a plant in the scope is deleted or changed, or created with an id that may
 * land below the newest (a client-chosen id; on PostgreSQL also a server-assigned one committed
 * after a larger one), and whenever the engine cannot tell what another writer changed; `top`
 * moves when one with the tag is created after every other (which only the last page can show).
 * Only equality means anything: the values are not counts (PostgreSQL gives strings for a scope
 * of several gardens).
 */
export interface ListMarks {
  reorder: number | string;
  top: number | string;
}

/** The plants of a store: each write checks the actor's role in the plant's garden in its own transaction. */
export interface PlantPort {
  /**
   * Inserts a plant; with `idem`, records the outcome against the claimed key (a plant that exists
   * too; a refusal by the garden records nothing), and with `event`, a plant.created event and its
   * deliveries to every matching enabled endpoint — all in one transaction.
   */
  createPlant(plant: NewPlant, idem?: IdempotencyRef, event?: NewEvent): Promise<CreateResult>;
  /**
   * Creates every plant or none, in one transaction, each with its plant.created event at `event`'s
   * time; with `idem`, records the outcome against the claimed key (a plant that exists too, with
   * its id; a refusal by a garden records nothing).
   */
  createPlants(plants: NewPlant[], idem?: IdempotencyRef, event?: NewEvent): Promise<BatchCreateResult>;
  /**
   * Every plant a list with these filters shows, in id order with versions, read from one snapshot
   * of the store and handed over a page at a time (the next page is read only when asked for), so
   * that memory does not grow with the plants. The snapshot is held until the last page has been
   * taken, so the caller takes them as fast as it can (the export spools them to a file, never at a
   * client's pace). Ending the iteration early ends the snapshot.
   */
  exportPlants(q: ExportQuery): AsyncIterable<PagePlant[]>;
  /** The plant with this id, whoever's garden it is in. */
  getPlant(id: number): Promise<VersionedPlant | null>;
  /**
   * The plant with this id and the role `user` has in its garden (null user: admin, `owner`), or
   * null when there is none or the user is no member of its garden: one read, by primary keys only.
   */
  plantFor(id: number, user: string | null): Promise<{ plant: VersionedPlant; role: Role } | null>;
  /** Up to `limit` plants with id > afterId, ascending, in the gardens and with the tag asked (with versions if asked). */
  listPlants(q: PageQuery): Promise<PagePlant[]>;
  /**
   * Changes the plant if it exists, the actor (non-null) is an editor or owner of its garden and
   * (ifVersions non-null) it has one of those versions: the check and the change are one atomic
   * step, whichever process or instance races it (missing before forbidden before mismatch). A change takes a new version; with `idem`, the outcome is recorded against
   * the claimed key; with `event`, a plant.updated event (with `previous`) and its deliveries — all
   * in one transaction. A patch that changes nothing writes nothing but the key's outcome.
   */
  updatePlant(
    id: number,
    actor: Actor,
    patch: PlantPatch,
    ifVersions: number[] | null,
    idem?: IdempotencyRef,
    event?: NewEvent,
  ): Promise<UpdateResult>;
  /**
   * Deletes the plant if it exists, the actor (non-null) is an editor or owner of its garden and
   * (ifVersions non-null) it has one of those versions, checked as updatePlant checks them; with
   * `event`, as createPlant. With `trash`, the plant moves to its garden's trash in the same
   * transaction (contract 13.2); an entry the trash held with its id already (deleted, made again,
   * deleted again) is erased for good then, with a plant.purged event caused as `event` is.
   */
  deletePlant(
    id: number,
    actor: Actor,
    event?: NewEvent,
    ifVersions?: number[] | null,
    trash?: Trashing | null,
  ): Promise<DeleteResult>;
  /**
   * What a cached list page of the plants of `gardens` (null: everyone's) with `tag` (null: any)
   * depends on, as of the moment it is read, whichever process wrote; null when the engine keeps
   * none for that scope (PostgreSQL: everyone's plants). Engines that cannot know every write omit
   * it, and their list pages are never cached.
   */
  listMarks?(gardens: string[] | null, tag: string | null): Promise<ListMarks | null>;
  /**
   * The user's memberships (as `memberships`) and the marks of the list of all their gardens'
   * plants with `tag`, read together (engines whose marks live in the database: one round trip).
   */
  scopeMarks?(user: string, tag: string | null): Promise<{ memberships: Membership[]; marks: ListMarks }>;
}
