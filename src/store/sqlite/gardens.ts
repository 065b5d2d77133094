import type Database from 'better-sqlite3';
import {
  type GardenFacts,
  MAKER_ROLE,
  type MemberFacts,
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
  type NewEvent,
  type NewGarden,
  type Role,
  refused,
} from '../store.js';
import type { SqliteEvents } from './events.js';
import type { SqliteTrashWrites } from './trash.js';

export interface GardenRow {
  id: string;
  name: string;
  home_user: string | null;
  created_at: number;
}

export const toGarden = (r: GardenRow): GardenRecord => ({
  id: r.id,
  name: r.name,
  homeUser: r.home_user,
  createdAt: new Date(r.created_at),
});

/**
 * The garden writes of SQLite (contract 3.2). Each runs inside the writer's transaction, which holds
 * the database's write lock from its first statement: the facts read here, the access policy's
 * decision on them and the change it allows are one step, whatever another request, process or
 * instance does meanwhile.
 */
export class SqliteGardenWrites {
  private readonly s;

  constructor(
    db: Database.Database,
    /** The writer's event log, which records a membership change's event in the same transaction. */
    private readonly events: () => SqliteEvents,
    /** The writer's trash: a garden's goes with it. */
    private readonly trash: () => SqliteTrashWrites,
  ) {
    this.s = {
      garden: db.prepare<[string], GardenRow>('SELECT * FROM gardens WHERE id = ?'),
      home: db.prepare<[string], GardenRow>('SELECT * FROM gardens WHERE home_user = ?'),
      // seq: the order of creation (migration 10), under the write lock this transaction holds.
      insertGarden: db.prepare<[string, string, string | null, number, string]>(
        `INSERT INTO gardens (id, name, home_user, created_at, created_by, seq)
         VALUES (?, ?, ?, ?, ?, (SELECT coalesce(max(seq), 0) + 1 FROM gardens))`,
      ),
      rename: db.prepare<[string, string]>('UPDATE gardens SET name = ? WHERE id = ?'),
      deleteGarden: db.prepare<[string]>('DELETE FROM gardens WHERE id = ?'),
      hasPlants: db.prepare<[string], number>('SELECT 1 FROM plants WHERE garden = ? LIMIT 1').pluck(),
      role: db
        .prepare<[string, string], Role>(
          'SELECT role FROM garden_members WHERE garden_id = ? AND user_id = ?',
        )
        .pluck(),
      member: db.prepare<[string, string], { role: Role; added_at: number }>(
        'SELECT role, added_at FROM garden_members WHERE garden_id = ? AND user_id = ?',
      ),
      insertMember: db.prepare<[string, string, Role, number]>(
        'INSERT INTO garden_members (garden_id, user_id, role, added_at) VALUES (?, ?, ?, ?)',
      ),
      setRole: db.prepare<[Role, string, string]>(
        'UPDATE garden_members SET role = ? WHERE garden_id = ? AND user_id = ?',
      ),
      memberRoles: db.prepare<[string], { user_id: string; role: Role }>(
        'SELECT user_id, role FROM garden_members WHERE garden_id = ? ORDER BY added_at, user_id',
      ),
      deleteMember: db.prepare<[string, string]>(
        'DELETE FROM garden_members WHERE garden_id = ? AND user_id = ?',
      ),
      membershipsOf: db
        .prepare<[string], number>('SELECT count(*) FROM garden_members WHERE user_id = ?')
        .pluck(),
      createdBy: db.prepare<[string], number>('SELECT count(*) FROM gardens WHERE created_by = ?').pluck(),
      members: db
        .prepare<[string], number>('SELECT count(*) FROM garden_members WHERE garden_id = ?')
        .pluck(),
      owners: db
        .prepare<[string], number>(
          `SELECT count(*) FROM garden_members WHERE garden_id = ? AND role = 'owner'`,
        )
        .pluck(),
    };
  }

  /** The user's home garden, made with the user as its owner when there is none yet. */
  home(user: string, make: { id: string; name: string; at: Date }): GardenRecord {
    const found = this.s.home.get(user);
    if (found) return toGarden(found);
    const at = make.at.getTime();
    this.s.insertGarden.run(make.id, make.name, user, at, user);
    this.s.insertMember.run(make.id, user, MAKER_ROLE, at);
    return { id: make.id, name: make.name, homeUser: user, createdAt: make.at };
  }

  /** A new garden owned by `owner`, unless the access policy's garden limits refuse it. */
  create(g: NewGarden): GardenChange<GardenRecord> {
    // A user with no home garden yet keeps a place for it, among those it makes and those it is in.
    const homeless = this.s.home.get(g.owner) === undefined ? 1 : 0;
    const refusal = mayCreateGarden(
      this.s.createdBy.get(g.owner)! + homeless,
      this.s.membershipsOf.get(g.owner)! + homeless,
    );
    if (refusal !== null) return refused(refusal);
    const at = g.at.getTime();
    this.s.insertGarden.run(g.id, g.name, null, at, g.owner);
    this.s.insertMember.run(g.id, g.owner, MAKER_ROLE, at);
    return { ok: { id: g.id, name: g.name, homeUser: null, createdAt: g.at } };
  }

  // The garden as a write by `actor` (null: admin) finds it, with the row; null: no such garden.
  private found(id: string, actor: Actor): (GardenFacts & { row: GardenRow }) | null {
    const row = this.s.garden.get(id);
    if (row === undefined) return null;
    const role = roleOf(actor, actor === null ? null : this.s.role.get(id, actor));
    return { row, homeUser: row.home_user, role };
  }

  // What the member rules need to know of `user` in the garden.
  private memberFacts(id: string, user: string, was: Role | null): MemberFacts {
    // A user with no home garden yet keeps a place for it: once made, it counts as one of its gardens.
    const homeless = this.s.home.get(user) === undefined ? 1 : 0;
    return {
      was,
      owners: this.s.owners.get(id)!,
      members: this.s.members.get(id)!,
      userGardens: this.s.membershipsOf.get(user)! + homeless,
    };
  }

  rename(id: string, actor: Actor, name: string): GardenChange<GardenRecord> {
    const g = this.found(id, actor);
    const refusal = mayRename(g);
    if (refusal !== null) return refused(refusal);
    this.s.rename.run(name, id);
    return { ok: toGarden({ ...g!.row, name }) };
  }

  delete(id: string, actor: Actor, event?: NewEvent): GardenChange<true> {
    const g = this.found(id, actor);
    const refusal = mayDelete(g, g !== null && this.s.hasPlants.get(id) !== undefined);
    if (refusal !== null) return refused(refusal);
    this.trash().purgeGarden(id, event);
    // Each member is told it was removed (a change feed learns from it that the plants are gone).
    if (event) for (const m of this.s.memberRoles.all(id)) this.record(event, id, m.user_id, m.role, null);
    this.s.deleteGarden.run(id);
    return { ok: true };
  }

  putMember(id: string, actor: Actor, user: string, role: Role, at: Date, event?: NewEvent): MemberPut {
    const g = this.found(id, actor);
    const was = this.s.member.get(id, user);
    const refusal = mayPutMember(g, user, role, this.memberFacts(id, user, was?.role ?? null));
    if (refusal !== null) return refused(refusal);
    if (event) this.record(event, id, user, was?.role ?? null, role);
    if (was === undefined) {
      this.s.insertMember.run(id, user, role, at.getTime());
      return { ok: { member: { user, role, addedAt: at }, created: true } };
    }
    if (was.role !== role) this.s.setRole.run(role, id, user);
    return { ok: { member: { user, role, addedAt: new Date(was.added_at) }, created: false } };
  }

  removeMember(id: string, actor: Actor, user: string, event?: NewEvent): GardenChange<true> {
    const g = this.found(id, actor);
    const was = this.s.member.get(id, user);
    const refusal = mayRemoveMember(g, actor, user, {
      was: was?.role ?? null,
      owners: this.s.owners.get(id)!,
    });
    if (refusal !== null) return refused(refusal);
    this.s.deleteMember.run(id, user);
    if (event) this.record(event, id, user, was!.role, null);
    return { ok: true };
  }

  // A membership change's event, if it changes a role (memberChange), in the open transaction.
  private record(event: NewEvent, garden: string, user: string, was: Role | null, now: Role | null): void {
    const change = memberChange(garden, user, was, now);
    if (change !== null) this.events().record(event, change.type, user, garden, change.data);
  }
}
