import type pg from 'pg';
import {
  type GardenFacts,
  MAKER_ROLE,
  mayCreateGarden,
  mayDelete,
  mayPutMember,
  mayRemoveMember,
  mayRename,
  roleOf,
} from '../../access/policy.js';
import { memberChange } from '../member-changes.js';
import {
  type Actor,
  type GardenChange,
  type GardenRecord,
  type MemberPut,
  type MemberRecord,
  type Membership,
  type NewEvent,
  type NewGarden,
  type Role,
  refused,
} from '../store.js';
import type { PgDb } from './db.js';
import { causeOf, RECORD_EVENT, RECORD_MEMBERS_REMOVED } from './events.js';

// Gardens and their members on PostgreSQL (contract 3.2; mirrors sqlite/gardens.ts): each
// write reads the facts the access policy's garden rules need, under its locks, and lets the policy
// decide.
//
// Every garden write locks the garden's row first, then reads what it checks in a statement of its
// own: under READ COMMITTED each statement sees what committed before it began, so a check made
// after the lock sees every change that held the lock before it (two owners removing each other:
// the second finds one owner left). Membership changes and renames take FOR NO KEY UPDATE, which
// excludes them from each other but not the FOR KEY SHARE that creates take on their garden
// (creates do not wait for a membership change, nor it for them); a delete takes FOR UPDATE, which
// waits for the creates in flight, so that its emptiness check sees their plants (plant-queries.ts).
// A user's garden count is guarded by an advisory lock on the user (there is no users row to lock),
// always taken after any garden lock, so the two kinds of lock never wait on each other in a cycle.
const USER_LOCK = 727_003;

const GARDEN_COLS = 'g.id, g.name, g.home_user, g.created_at';

export const GARDEN_QUERIES = {
  recordMemberEvent: RECORD_EVENT,
  recordMembersRemoved: RECORD_MEMBERS_REMOVED,
  homeOf: `SELECT ${GARDEN_COLS} FROM gardens g WHERE g.home_user = $1`,
  // The garden and its owner membership in one statement; a racing instance's insert wins quietly.
  makeHome: `WITH g AS (INSERT INTO gardens (id, name, home_user, created_at, created_by) VALUES ($1, $2, $3, $4, $3)
      ON CONFLICT (home_user) DO NOTHING RETURNING *),
    m AS (INSERT INTO garden_members (garden_id, user_id, role, added_at)
      SELECT id, home_user, '${MAKER_ROLE}', created_at FROM g)
    SELECT ${GARDEN_COLS} FROM g`,
  gardensOf: `SELECT ${GARDEN_COLS}, m.role FROM garden_members m JOIN gardens g ON g.id = m.garden_id
    WHERE m.user_id = $1 ORDER BY g.home_user IS NOT DISTINCT FROM $1 DESC, g.seq`,
  memberships: 'SELECT garden_id AS garden, role FROM garden_members WHERE user_id = $1 ORDER BY garden_id',
  gardenFor: `SELECT ${GARDEN_COLS}, m.role FROM gardens g
    LEFT JOIN garden_members m ON m.garden_id = g.id AND m.user_id = $2 WHERE g.id = $1`,
  lockUser: `SELECT pg_advisory_xact_lock(${USER_LOCK}, hashtext($1))`,
  // Counted after lockUser, in a statement of its own (see above), which createGarden holds until
  // it commits. A user with no home garden yet keeps a place for it, among the gardens it makes and
  // those it is in.
  userGardens: `WITH h AS (SELECT (NOT EXISTS (SELECT 1 FROM gardens WHERE home_user = $1))::int AS homeless)
    SELECT ((SELECT count(*) FROM gardens WHERE created_by = $1) + h.homeless)::int AS made,
      ((SELECT count(*) FROM garden_members WHERE user_id = $1) + h.homeless)::int AS member FROM h`,
  createGarden: `WITH g AS (INSERT INTO gardens (id, name, home_user, created_at, created_by)
      VALUES ($1, $2, NULL, $4, $3) RETURNING *),
    m AS (INSERT INTO garden_members (garden_id, user_id, role, added_at) SELECT id, $3, '${MAKER_ROLE}', created_at FROM g)
    SELECT ${GARDEN_COLS} FROM g`,
  lockGarden: 'SELECT id FROM gardens WHERE id = $1 FOR NO KEY UPDATE',
  lockGardenToDelete: 'SELECT id FROM gardens WHERE id = $1 FOR UPDATE',
  // A new member's garden count needs its user's lock: taken once the garden's row is locked.
  lockGardenAndUser: `WITH g AS (SELECT id FROM gardens WHERE id = $1 FOR NO KEY UPDATE)
    SELECT g.id, pg_advisory_xact_lock(${USER_LOCK}, hashtext($2))::text AS locked FROM g`,
  gardenActor: `SELECT ${GARDEN_COLS},
      (SELECT role FROM garden_members WHERE garden_id = $1 AND user_id = $2) AS role
    FROM gardens g WHERE g.id = $1`,
  memberState: `SELECT m.role, m.added_at,
      (SELECT count(*) FROM garden_members WHERE garden_id = $1 AND role = 'owner')::int AS owners,
      (SELECT count(*) FROM garden_members WHERE garden_id = $1)::int AS members,
      -- A user with no home garden yet keeps a place for it: once made, it counts as one of its gardens.
      ((SELECT count(*) FROM garden_members WHERE user_id = $2)
        + (NOT EXISTS (SELECT 1 FROM gardens WHERE home_user = $2))::int)::int AS user_gardens
    FROM (SELECT 1) one LEFT JOIN garden_members m ON m.garden_id = $1 AND m.user_id = $2`,
  hasPlants: 'SELECT EXISTS (SELECT 1 FROM plants WHERE garden = $1) AS any',
  renameGarden: `UPDATE gardens g SET name = $2 WHERE g.id = $1 RETURNING ${GARDEN_COLS}`,
  deleteGarden: 'DELETE FROM gardens WHERE id = $1',
  listMembers: `SELECT user_id, role, added_at FROM garden_members WHERE garden_id = $1 ORDER BY added_at, user_id`,
  insertMember: 'INSERT INTO garden_members (garden_id, user_id, role, added_at) VALUES ($1, $2, $3, $4)',
  setRole: 'UPDATE garden_members SET role = $3 WHERE garden_id = $1 AND user_id = $2',
  deleteMember: 'DELETE FROM garden_members WHERE garden_id = $1 AND user_id = $2',
  membersOf: 'SELECT garden_id, user_id FROM garden_members WHERE garden_id = ANY($1::text[])',
} as const;

type GardenQuery = keyof typeof GARDEN_QUERIES;

interface GardenRow {
  id: string;
  name: string;
  home_user: string | null;
  created_at: Date;
}

const toGarden = (r: GardenRow): GardenRecord => ({
  id: r.id,
  name: r.name,
  homeUser: r.home_user,
  createdAt: r.created_at,
});

/** The garden reads and writes of the PostgreSQL store. */
export class PgGardens {
  constructor(private readonly db: PgDb<GardenQuery | 'purgeGardenTrash'>) {}

  /** The user's home garden, made (with the user as owner) when there is none; racing callers get one garden. */
  async home(user: string, make: { id: string; name: string; at: Date }): Promise<GardenRecord> {
    const found = (await this.db.q<GardenRow>('homeOf', [user])).rows[0];
    if (found) return toGarden(found);
    const made = (await this.db.q<GardenRow>('makeHome', [make.id, make.name, user, make.at])).rows[0];
    if (made) return toGarden(made);
    // Another caller made it first; it has committed (ON CONFLICT waited for it), so it is read now.
    const other = (await this.db.q<GardenRow>('homeOf', [user])).rows[0];
    if (!other) throw new Error(`the home garden of ${user} vanished while it was made`);
    return toGarden(other);
  }

  /** The user's gardens with its role in each, its home garden first, then by creation. */
  async gardensOf(user: string): Promise<(GardenRecord & { role: Role })[]> {
    const rows = (await this.db.q<GardenRow & { role: Role }>('gardensOf', [user])).rows;
    return rows.map((r) => ({ ...toGarden(r), role: r.role }));
  }

  /** The user's memberships, by garden id. */
  async memberships(user: string): Promise<Membership[]> {
    return (await this.db.q<Membership>('memberships', [user])).rows;
  }

  /** The garden and the user's role in it (admin: owner); null when missing or not a member. */
  async gardenFor(id: string, user: string | null): Promise<{ garden: GardenRecord; role: Role } | null> {
    const row = (await this.db.q<GardenRow & { role: Role | null }>('gardenFor', [id, user])).rows[0];
    if (!row) return null;
    const role = roleOf(user, row.role);
    return role === null ? null : { garden: toGarden(row), role };
  }

  /** A new garden owned by `owner`, unless the access policy's garden limits refuse it. */
  createGarden(g: NewGarden): Promise<GardenChange<GardenRecord>> {
    return this.db.tx(async (c) => {
      await this.db.q('lockUser', [g.owner], c);
      const n = (await this.db.q<{ made: number; member: number }>('userGardens', [g.owner], c)).rows[0]!;
      const refusal = mayCreateGarden(n.made, n.member);
      if (refusal !== null) return refused(refusal);
      const row = (await this.db.q<GardenRow>('createGarden', [g.id, g.name, g.owner, g.at], c)).rows[0]!;
      return { ok: toGarden(row) };
    });
  }

  // Locks the garden (see the top of this file), then reads it and the actor's role (null: admin)
  // as the garden rules take them; null when there is no such garden.
  private async locked(
    c: pg.PoolClient,
    id: string,
    actor: Actor,
    lock: 'lockGarden' | 'lockGardenToDelete' | { user: string },
  ): Promise<(GardenFacts & { row: GardenRow }) | null> {
    const got =
      typeof lock === 'string'
        ? await this.db.q(lock, [id], c)
        : await this.db.q('lockGardenAndUser', [id, lock.user], c);
    if (got.rowCount === 0) return null;
    const row = (await this.db.q<GardenRow & { role: Role | null }>('gardenActor', [id, actor], c)).rows[0];
    return row ? { row, homeUser: row.home_user, role: roleOf(actor, row.role) } : null;
  }

  /** Renames a garden the actor owns. */
  renameGarden(id: string, actor: Actor, name: string): Promise<GardenChange<GardenRecord>> {
    return this.db.tx(async (c) => {
      const refusal = mayRename(await this.locked(c, id, actor, 'lockGarden'));
      if (refusal !== null) return refused(refusal);
      const row = (await this.db.q<GardenRow>('renameGarden', [id, name], c)).rows[0]!;
      return { ok: toGarden(row) };
    });
  }

  /**
   * Deletes a garden with no plants, its trash first (each entry with its plant.purged event), then
   * tells each member it was removed (member.removed); its memberships go with it.
   */
  deleteGarden(id: string, actor: Actor, event?: NewEvent): Promise<GardenChange<true>> {
    return this.db.tx(async (c) => {
      const g = await this.locked(c, id, actor, 'lockGardenToDelete');
      const hasPlants = g !== null && (await this.db.q<{ any: boolean }>('hasPlants', [id], c)).rows[0]!.any;
      const refusal = mayDelete(g, hasPlants);
      if (refusal !== null) return refused(refusal);
      await this.db.q('purgeGardenTrash', [id, event?.at ?? null, ...causeOf(event)], c);
      if (event) await this.db.q('recordMembersRemoved', [id, event.at, ...causeOf(event)], c);
      await this.db.q('deleteGarden', [id], c);
      return { ok: true as const };
    });
  }

  /** The members of each of the gardens, in one statement. */
  async membersOf(gardens: string[]): Promise<Map<string, string[]>> {
    const members = new Map<string, string[]>();
    if (gardens.length === 0) return members;
    const rows = (await this.db.q<{ garden_id: string; user_id: string }>('membersOf', [gardens])).rows;
    for (const r of rows) {
      const users = members.get(r.garden_id);
      if (users === undefined) members.set(r.garden_id, [r.user_id]);
      else users.push(r.user_id);
    }
    return members;
  }

  /** The garden's members, by when they were added. */
  async listMembers(id: string): Promise<MemberRecord[]> {
    const rows = (await this.db.q<{ user_id: string; role: Role; added_at: Date }>('listMembers', [id])).rows;
    return rows.map((r) => ({ user: r.user_id, role: r.role, addedAt: r.added_at }));
  }

  /** Adds a member or changes its role, with the limits, the last owner and a home garden's user checked. */
  putMember(
    id: string,
    actor: Actor,
    user: string,
    role: Role,
    at: Date,
    event?: NewEvent,
  ): Promise<MemberPut> {
    return this.db.tx(async (c) => {
      const g = await this.locked(c, id, actor, { user });
      const was = await this.memberState(c, id, user);
      const refusal = mayPutMember(g, user, role, {
        was: was.role,
        owners: was.owners,
        members: was.members,
        userGardens: was.user_gardens,
      });
      if (refusal !== null) return refused(refusal);
      if (event) await this.record(c, event, id, user, was.role, role);
      if (was.role === null) {
        await this.db.q('insertMember', [id, user, role, at], c);
        return { ok: { member: { user, role, addedAt: at }, created: true } };
      }
      if (was.role !== role) await this.db.q('setRole', [id, user, role], c);
      return { ok: { member: { user, role, addedAt: was.added_at! }, created: false } };
    });
  }

  /** Removes a member, by an owner or by the member itself (leaving); never the last owner or a home garden's user. */
  removeMember(id: string, actor: Actor, user: string, event?: NewEvent): Promise<GardenChange<true>> {
    return this.db.tx(async (c) => {
      const g = await this.locked(c, id, actor, 'lockGarden');
      const was = await this.memberState(c, id, user);
      const refusal = mayRemoveMember(g, actor, user, { was: was.role, owners: was.owners });
      if (refusal !== null) return refused(refusal);
      await this.db.q('deleteMember', [id, user], c);
      if (event) await this.record(c, event, id, user, was.role, null);
      return { ok: true as const };
    });
  }

  // A membership change's event, if it changes a role (memberChange), in the change's transaction.
  private async record(
    c: pg.PoolClient,
    event: NewEvent,
    garden: string,
    user: string,
    was: Role | null,
    now: Role | null,
  ): Promise<void> {
    const change = memberChange(garden, user, was, now);
    if (change === null) return;
    const data = JSON.stringify(change.data);
    await this.db.q('recordMemberEvent', [change.type, user, garden, data, event.at, ...causeOf(event)], c);
  }

  private async memberState(c: pg.PoolClient, id: string, user: string) {
    return (
      await this.db.q<{
        role: Role | null;
        added_at: Date | null;
        owners: number;
        members: number;
        user_gardens: number;
      }>('memberState', [id, user], c)
    ).rows[0]!;
  }
}
