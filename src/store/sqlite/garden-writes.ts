import type Database from 'better-sqlite3';
import {
  type Actor,
  type GardenChange,
  type GardenRecord,
  MAX_GARDENS_CREATED,
  MAX_MEMBERS_PER_GARDEN,
  MAX_MEMBERSHIPS_PER_USER,
  type MemberRecord,
  type Role,
  refused,
} from '../store.js';

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
 * the database's write lock from its first statement: every check here and the change it guards
 * are one step, whatever another request, process or instance does meanwhile.
 */
export class SqliteGardenWrites {
  private readonly s;

  constructor(db: Database.Database) {
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
    this.s.insertMember.run(make.id, user, 'owner', at);
    return { id: make.id, name: make.name, homeUser: user, createdAt: make.at };
  }

  /**
   * A new garden owned by `owner`, unless it has made as many gardens as a user may (its home garden,
   * made or to be made, among them) or is in as many as a user may be.
   */
  create(g: { id: string; name: string; owner: string; at: Date }): GardenChange<GardenRecord> {
    // A user with no home garden yet keeps a place for it, among those it makes and those it is in.
    const homeless = this.s.home.get(g.owner) === undefined ? 1 : 0;
    if (
      this.s.createdBy.get(g.owner)! + homeless >= MAX_GARDENS_CREATED ||
      this.s.membershipsOf.get(g.owner)! + homeless >= MAX_MEMBERSHIPS_PER_USER
    )
      return refused('too_many_gardens');
    const at = g.at.getTime();
    this.s.insertGarden.run(g.id, g.name, null, at, g.owner);
    this.s.insertMember.run(g.id, g.owner, 'owner', at);
    return { ok: { id: g.id, name: g.name, homeUser: null, createdAt: g.at } };
  }

  // The garden, if the actor (null: admin) is a member; `owner` says whether it owns it.
  private owned(id: string, actor: Actor): { garden: GardenRow; owner: boolean } | { refused: 'missing' } {
    const garden = this.s.garden.get(id);
    if (garden === undefined) return refused('missing');
    if (actor === null) return { garden, owner: true };
    const role = this.s.role.get(id, actor);
    if (role === undefined) return refused('missing');
    return { garden, owner: role === 'owner' };
  }

  rename(id: string, actor: Actor, name: string): GardenChange<GardenRecord> {
    const found = this.owned(id, actor);
    if ('refused' in found) return found;
    if (!found.owner) return refused('forbidden');
    this.s.rename.run(name, id);
    return { ok: toGarden({ ...found.garden, name }) };
  }

  delete(id: string, actor: Actor): GardenChange<true> {
    const found = this.owned(id, actor);
    if ('refused' in found) return found;
    if (!found.owner) return refused('forbidden');
    if (found.garden.home_user !== null) return refused('home_garden');
    if (this.s.hasPlants.get(id) !== undefined) return refused('garden_not_empty');
    this.s.deleteGarden.run(id);
    return { ok: true };
  }

  putMember(
    id: string,
    actor: Actor,
    user: string,
    role: Role,
    at: Date,
  ): GardenChange<{ member: MemberRecord; created: boolean }> {
    const found = this.owned(id, actor);
    if ('refused' in found) return found;
    if (!found.owner) return refused('forbidden');
    const was = this.s.member.get(id, user);
    if (was === undefined) {
      // A user with no home garden yet keeps a place for it: once made, it counts as one of its gardens.
      const homeless = this.s.home.get(user) === undefined ? 1 : 0;
      if (this.s.membershipsOf.get(user)! + homeless >= MAX_MEMBERSHIPS_PER_USER)
        return refused('too_many_gardens');
      if (this.s.members.get(id)! >= MAX_MEMBERS_PER_GARDEN) return refused('too_many_members');
      this.s.insertMember.run(id, user, role, at.getTime());
      return { ok: { member: { user, role, addedAt: at }, created: true } };
    }
    if (was.role !== role) {
      if (found.garden.home_user === user) return refused('home_garden');
      if (was.role === 'owner' && this.s.owners.get(id)! <= 1) return refused('last_owner');
      this.s.setRole.run(role, id, user);
    }
    return { ok: { member: { user, role, addedAt: new Date(was.added_at) }, created: false } };
  }

  removeMember(id: string, actor: Actor, user: string): GardenChange<true> {
    const found = this.owned(id, actor);
    if ('refused' in found) return found;
    // A member may always leave; removing anyone else takes an owner.
    if (!found.owner && actor !== user) return refused('forbidden');
    const was = this.s.member.get(id, user);
    if (was === undefined) return refused('no_member');
    if (found.garden.home_user === user) return refused('home_garden');
    if (was.role === 'owner' && this.s.owners.get(id)! <= 1) return refused('last_owner');
    this.s.deleteMember.run(id, user);
    return { ok: true };
  }
}
