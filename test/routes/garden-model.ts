// The model the garden property test checks the app against: the operations fast-check draws
// (indexes resolved against the model when a step runs), and the memberships, plants and events
// a run has made, with each user's gardens after every step.
import fc from 'fast-check';

/** How many users a run has. */
export const USERS = 4;
/** A garden id and a plant id that nothing has: what an op names when the model has none. */
export const FAKE_GARDEN = 'gdn_000000000000000000000000';
export const FAKE_PLANT = 9_007_199_254_740_000;
/** The tags plants are given. */
export const TAGS = ['a', 'b'] as const;

export type Role = 'viewer' | 'editor' | 'owner';

// ---- the operations, as fast-check draws them (indexes are resolved against the model) ----

export type Op =
  | { k: 'garden'; u: number }
  | { k: 'share'; a: number; g: number; t: number; role: Role; fit: boolean }
  | { k: 'unshare'; a: number; g: number; t: number; fit: boolean }
  | { k: 'leave'; a: number; g: number; fit: boolean }
  | { k: 'dropGarden'; a: number; g: number; fit: boolean }
  | {
      k: 'plant';
      u: number;
      g: number | null;
      tag: number | null;
      fit: boolean;
      viewer: boolean;
      /** The id asked for: none (the server's), a live plant's (409), or a deleted one's (made again). */
      id: 'server' | 'live' | 'deleted';
      p: number;
    }
  | {
      k: 'patch';
      u: number;
      p: number;
      rename: boolean;
      tag: number | null | undefined;
      ifMatch: 'current' | '*' | 'stale';
      fit: boolean;
      viewer: boolean;
    }
  | { k: 'delete'; u: number; p: number; fit: boolean; viewer: boolean }
  | { k: 'get'; u: number; p: number; fit: boolean }
  | {
      k: 'list';
      u: number;
      fit: boolean;
      limit: number;
      g: number | null;
      nested: boolean;
      tag: number | null;
      include: boolean;
      between: Op | null;
    };

const user = fc.nat(USERS - 1);
const pick = fc.nat(1_000);
const role = fc.constantFrom<Role>('viewer', 'viewer', 'editor', 'owner');
// Mostly a sensible pick (an owner sharing, a member of the plant's garden changing it); else any.
const fit = fc.constantFrom(true, true, true, false);
// With a sensible pick, sometimes a viewer of the garden (when it has one) tries to change it.
const viewer = fc.constantFrom(false, true);
const tagPick = fc.option(fc.nat(TAGS.length - 1), { nil: null });

const simpleOp: fc.Arbitrary<Op> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ k: fc.constant('garden' as const), u: user }) },
  {
    weight: 5,
    arbitrary: fc.record({ k: fc.constant('share' as const), a: user, g: pick, t: user, role, fit }),
  },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('unshare' as const), a: user, g: pick, t: user, fit }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('leave' as const), a: user, g: pick, fit }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('dropGarden' as const), a: user, g: pick, fit }) },
  {
    weight: 6,
    arbitrary: fc.record({
      k: fc.constant('plant' as const),
      u: user,
      g: fc.option(pick, { nil: null, freq: 4 }),
      tag: tagPick,
      fit,
      viewer,
      id: fc.constantFrom<'server' | 'live' | 'deleted'>(
        'server',
        'server',
        'server',
        'server',
        'live',
        'deleted',
      ),
      p: pick,
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      k: fc.constant('patch' as const),
      u: user,
      p: pick,
      rename: fc.boolean(),
      tag: fc.option(tagPick, { nil: undefined }),
      ifMatch: fc.constantFrom<'current' | '*' | 'stale'>('current', 'current', '*', 'stale'),
      fit,
      viewer,
    }),
  },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('delete' as const), u: user, p: pick, fit, viewer }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('get' as const), u: user, p: pick, fit }) },
);

const listOp: fc.Arbitrary<Op> = fc.record({
  k: fc.constant('list' as const),
  u: user,
  fit,
  limit: fc.integer({ min: 1, max: 6 }),
  g: fc.option(pick, { nil: null }),
  nested: fc.boolean(),
  tag: tagPick,
  include: fc.boolean(),
  // Another step taken between the first page and the rest (a membership change mid-walk).
  between: fc.option(simpleOp, { nil: null, freq: 2 }),
});

export const ops = fc.array(fc.oneof({ weight: 8, arbitrary: simpleOp }, { weight: 2, arbitrary: listOp }), {
  minLength: 8,
  maxLength: 28,
});

// ---- the model ----

export interface MGarden {
  id: string;
  home: string | null;
  members: Map<string, Role>;
  deleted: boolean;
}

export interface MPlant {
  id: number;
  garden: string;
  name: string;
  tag: string | null;
  etag: string;
  deleted: boolean;
  /** The step that deleted it. */
  deletedAt?: number;
}

interface MEvent {
  type: 'plant.created' | 'plant.updated' | 'plant.deleted';
  id: number;
  garden: string;
  name: string;
  tag: string | null;
  /** The step it was committed in. */
  step: number;
}

export const key = (e: { type: string; id: number; name: string; tag: string | null }) =>
  `${e.type}|${e.id}|${e.name}|${e.tag ?? ''}`;

export class Model {
  gardens: MGarden[] = [];
  plants: MPlant[] = [];
  events: MEvent[] = [];
  /** Each user's gardens after each step (index: step; 0 is the start). */
  history: Map<string, Set<string>>[] = [];

  constructor(readonly users: string[]) {}

  garden(i: number): MGarden | undefined {
    return this.gardens[i % (this.gardens.length + 1)];
  }
  gardenId(i: number): string {
    return this.garden(i)?.id ?? FAKE_GARDEN;
  }
  plant(i: number): MPlant | undefined {
    return this.plants[i % (this.plants.length + 1)];
  }
  roleIn(u: string, gid: string): Role | undefined {
    const g = this.gardens.find((x) => x.id === gid);
    return g && !g.deleted ? g.members.get(u) : undefined;
  }
  gardensOf(u: string): MGarden[] {
    return this.gardens.filter((g) => !g.deleted && g.members.has(u));
  }
  visible(u: string, filter: { garden?: string; tag?: string | null } = {}): MPlant[] {
    return this.plants
      .filter(
        (p) =>
          !p.deleted &&
          this.roleIn(u, p.garden) !== undefined &&
          (filter.garden === undefined || p.garden === filter.garden) &&
          (filter.tag === undefined || filter.tag === null || p.tag === filter.tag),
      )
      .sort((a, b) => a.id - b.id);
  }
  live(): MGarden[] {
    return this.gardens.filter((g) => !g.deleted);
  }
  /** The garden an op names: with `fit`, one that exists now (of `among` when given); else any, or one that never was. */
  pickGarden(i: number, fit: boolean, among?: MGarden[]): MGarden | undefined {
    const choice = among ?? this.live();
    if (fit && choice.length > 0) return choice[i % choice.length];
    return this.garden(i);
  }
  /** The plant an op names: with `fit`, a live one; else any of the run's, or one that never was. */
  pickPlant(i: number, fit: boolean): MPlant | undefined {
    const live = this.plants.filter((p) => !p.deleted);
    if (fit && live.length > 0) return live[i % live.length];
    return this.plant(i);
  }
  /** The users (by index) that are members of the garden, with `roles` when given, in user order. */
  memberIndexes(g: MGarden | undefined, roles?: Role[]): number[] {
    if (!g || g.deleted) return [];
    return this.users
      .map((u, i) => [i, g.members.get(u)] as const)
      .filter(([, r]) => r !== undefined && (roles === undefined || roles.includes(r)))
      .map(([i]) => i);
  }
  /** Members of the garden that may change its plants, or with `viewer` its viewers (when it has any). */
  changers(g: MGarden | undefined, viewer: boolean): number[] {
    const viewers = this.memberIndexes(g, ['viewer']);
    return viewer && viewers.length > 0 ? viewers : this.memberIndexes(g);
  }
  /** With `fit`, the `i`-th of `candidates` (when there are any); else `i` itself. */
  static who(i: number, fit: boolean, candidates: number[]): number {
    return fit && candidates.length > 0 ? candidates[i % candidates.length]! : i;
  }
  owners(g: MGarden): number {
    return [...g.members.values()].filter((r) => r === 'owner').length;
  }
  snapshot(): void {
    this.history.push(new Map(this.users.map((u) => [u, new Set(this.gardensOf(u).map((g) => g.id))])));
  }
  /** Whether `u` was a member of `garden` at some step from `from` to `to`. */
  memberBetween(u: string, garden: string, from: number, to: number): boolean {
    for (let s = from; s <= to; s++) if (this.history[s]?.get(u)?.has(garden)) return true;
    return false;
  }
  /** Whether `u` was a member of `garden` at every step from `from` to `to`. */
  memberThroughout(u: string, garden: string, from: number, to: number): boolean {
    for (let s = from; s <= to; s++) if (!this.history[s]?.get(u)?.has(garden)) return false;
    return true;
  }
}

/** A plant as the API shows it (no id or garden unless asked). */
export const plantView = (p: MPlant) => (p.tag === null ? { name: p.name } : { name: p.name, tag: p.tag });
