import { randomBytes } from 'node:crypto';
import { countDown } from '../counts.js';
import type { AttemptOutcome, DeliveryJob, FinishedAttempt, LogProgress, Store } from '../store/store.js';
import { tracing } from '../telemetry/tracing.js';
import { eventPayload } from './event.js';
import { ConnectionPool, type PostResult, postWebhook, type Resolver } from './outbound.js';
import { signWebhook } from './signing.js';

/** An endpoint that has acknowledged nothing for this long while its deliveries fail is disabled. */
export const FAILING_DISABLE_MS = 5 * 86_400_000;
const NUDGE_MS = 10;
/**
 * Records of attempts are written at most this often (what ends meanwhile goes in the next), so a
 * `deliver` process sending thousands a second takes the store's write lock a few dozen times a
 * second, not once per answer: on SQLite every write of another process holds up the server's.
 */
const RECORD_EVERY_MS = 10;
/**
 * What a process may hold claimed (in flight and waiting for a slot), as a multiple of the
 * concurrency, at most: 256 with the default 32. With 4 (128) a drain of ten busy endpoints went
 * at about 4,000-5,000 deliveries/s on PostgreSQL on 2026-11-28 and 5,100-6,200 with 8
 * (docs/benchmarks.md, "Where a PostgreSQL drain's time goes"). Under that bound, what is held is
 * at most the concurrency plus what the slots are expected to start within WAIT_TARGET_MS at the
 * pace they have been freeing (slotMs): receivers that answer slowly leave less claimed ahead.
 * This paces the process as a whole; what waits for one endpoint's own slots is covered by that
 * endpoint's window's lease, which its records renew (RECORD_MARGIN_MS).
 */
const CLAIM_AHEAD = 8;
/**
 * What a delivery's lease must still cover when it is sent: the receiver's timeout and this much
 * to record the attempt. A claim leases for the timeout plus 10 s, so a delivery can wait 8 s from
 * its claim; one of an endpoint's log can wait longer when its window's lease was renewed since:
 * by a record of the window's progress that was written before the lease known until then ended,
 * or, when what waits is no longer covered, by asking the store (renew). A queued retry whose lease
 * no longer covers it has that lease renewed the same way (renewQueuedLeases); one the store will
 * not renew is let go, and a window it will not renew (another process has taken it) is let go and
 * sent again from the endpoint's position by whoever holds it.
 */
const RECORD_MARGIN_MS = 2_000;
/** How long the deliveries claimed ahead are expected to wait for a slot, at most (see CLAIM_AHEAD). */
const WAIT_TARGET_MS = 4_000;
/**
 * An endpoint stays in the claims while this process holds fewer than ENDPOINT_HOLD × perEndpoint
 * of it, and one claim gives it at most that many (so it may hold up to twice that, less one): a
 * busy endpoint's backlog drains without a claim per few deliveries, and its slots stay busy
 * however slowly it answers.
 */
const ENDPOINT_HOLD = 4;
/**
 * A delivery whose receiver has not answered within this long gives its slot of the process back:
 * it stays in flight, counted against its endpoint's own slots (perEndpoint) and against what the
 * process holds (CLAIM_AHEAD × concurrency), but no longer against the process's concurrency. So
 * receivers that answer slowly, however many, never take every slot from those that answer at
 * once: with 9 endpoints answering after 3 s and one at once behind one process (4 slots each,
 * 32 in all), the fast one had 142 of its 2,000 deliveries in 120 s when the slow ones kept their
 * slots (docs/benchmarks.md, "Slow receivers"). Endpoints with a delivery slow to answer hold at
 * most (CLAIM_AHEAD - 1) × concurrency between them before they are left out of the claims, so
 * the rest of what a process holds goes to endpoints that answer.
 */
const SLOW_SLOT_MS = 1_000;

/** One event of an endpoint's log window: claimed, then being recorded (its attempt made). */
interface WindowEntry {
  window: LogWindow;
  position: string;
  recording: boolean;
}

/**
 * What this process holds of an endpoint's log under its lease: the events claimed and not yet
 * recorded, in log order, and how far the window reaches (everything of the endpoint's up to there
 * is claimed by this process or was sent).
 */
interface LogWindow {
  endpointId: string;
  reach: string;
  entries: WindowEntry[];
  /** Records under way that report this window's progress. */
  writes: number;
  /** Its position moved (or its lease is to end): report it with the next record. */
  dirty: boolean;
  /**
   * Until when (this.clock) its lease is known to be this process's: set by the claim that leased
   * it, renewed by each record of its progress written while the lease still held.
   */
  leaseEnd: number;
  /** The latest end any claim or record of this process may have given its lease. */
  leaseMax: number;
}

export interface DispatcherOptions {
  store: Store;
  /** How long a receiver has to answer one delivery. */
  timeoutMs: number;
  /** Waits before each retry; after the last, the delivery is marked failed. */
  schedule: number[];
  allowPrivate: boolean;
  resolver?: Resolver;
  clock?: () => number;
  /** 0 … 1; a retry waits its step plus up to 10 % of it, times this. */
  jitter?: () => number;
  /** How often the store is asked for due deliveries when nothing nudged this process. */
  pollMs?: number;
  /** Deliveries in flight from this process, at most. */
  concurrency?: number;
  /** Deliveries in flight to one endpoint from this process, at most. */
  perEndpoint?: number;
  /** Keep connections to receivers alive between deliveries (default true). */
  keepAlive?: boolean;
  onAttempt?: (outcome: AttemptOutcome) => void;
  warn?: (obj: object, msg: string) => void;
}

/**
 * Sends webhook deliveries: runs in every `serve` process (unless it is started without) and in
 * `deliver` processes. Deliveries are leased from the store (any number of processes share the
 * work; a crashed one's leases run out and are taken over), sent through the one outbound client
 * over kept-alive connections, and reported back with their next attempt: the attempts that end
 * while one report is being written go together in the next, one write for them all. A delivery
 * stays leased until its attempt is recorded, so a crash before that sends it again (at least
 * once). Concurrency is bounded overall and per endpoint, so one slow or dead receiver delays no
 * other, and a receiver slow to answer gives the process's slot back (SLOW_SLOT_MS), so many of
 * them delay none either; nothing queues in memory beyond what is held (CLAIM_AHEAD). The slots
 * are shared fairly between users: claims put the owners this process holds the fewest deliveries of first, and a free slot
 * goes to the waiting delivery of the owner with the fewest in flight, so one user's many endpoints
 * or long backlog (on one receiving host or many) cannot hold back another user's deliveries.
 */
export class Dispatcher {
  private readonly id = `dispatcher-${randomBytes(6).toString('hex')}`;
  private readonly clock: () => number;
  private readonly jitter: () => number;
  private readonly concurrency: number;
  private readonly perEndpoint: number;
  private readonly leaseMs: number;
  private readonly inflight = new Map<string, number>();
  // Deliveries in flight holding a slot of the process, and those that gave theirs back (SLOW_SLOT_MS).
  private inflightTotal = 0;
  private slowTotal = 0;
  // Of each endpoint's deliveries in flight, those that gave their slot back.
  private readonly slowBy = new Map<string, number>();
  // Deliveries in flight by endpoint owner.
  private readonly ownerInflight = new Map<string, number>();
  // Claimed deliveries waiting for a slot of their endpoint, and when their claim's lease ends.
  private readonly waiting = new Map<string, { job: DeliveryJob; until: number }[]>();
  // The log windows this process holds, by endpoint; the window entry of each log job held.
  private readonly windows = new Map<string, LogWindow>();
  private readonly entries = new Map<DeliveryJob, WindowEntry>();
  // Windows let go (drop) rather than ended by their last record.
  private readonly dropped = new WeakSet<LogWindow>();
  // Queued deliveries whose lease the store would not renew (another process has taken it).
  private readonly refused = new WeakSet<DeliveryJob>();
  // Endpoints whose window was let go, until their lease has run out (then whoever claims them
  // sends the window again from their position).
  private readonly holdOff = new Map<string, number>();
  // How long a slot was taken lately (send to answer), a moving average; at first, as if each took
  // WAIT_TARGET_MS (what waits is then held to the concurrency until answers come in).
  private slotMs = WAIT_TARGET_MS;
  private claiming = false;
  // Endpoints whose window's lease is to be renewed, or is being renewed, before what waits of them
  // is sent (renew): pump passes them over meanwhile.
  private readonly renewing = new Set<string>();
  private renewRun: Promise<void> | undefined;
  // Deliveries let go unsent since the last warning (their lease no longer covered an attempt).
  private lateCount = 0;
  private lateWarned = 0;
  private waitingTotal = 0;
  private timer: NodeJS.Timeout | undefined;
  private due = 0;
  private lastClaim = 0;
  private ticking = false;
  private again = false;
  private stopped = false;
  private readonly sending = new Set<Promise<void>>();
  private tickRun: Promise<void> | undefined;
  private readonly pool: ConnectionPool | undefined;
  // Attempts made and not yet recorded, and the write recording the previous lot.
  private finished: { f: FinishedAttempt; entry?: WindowEntry; done: (err?: unknown) => void }[] = [];
  private recording = false;

  constructor(private readonly opts: DispatcherOptions) {
    this.clock = opts.clock ?? Date.now;
    this.jitter = opts.jitter ?? Math.random;
    this.concurrency = opts.concurrency ?? 32;
    this.perEndpoint = opts.perEndpoint ?? 4;
    // The attempt is bounded by the timeout, and recording it takes moments: a live process keeps
    // what it leased, and a dead one's deliveries are taken over this long after it died.
    this.leaseMs = opts.timeoutMs + 10_000;
    this.pool = opts.keepAlive === false ? undefined : new ConnectionPool();
  }

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  /** Looks for work now (a change and its event just committed in this process). */
  nudge(): void {
    if (this.stopped) return;
    // Remembered even while a claim is running: its end must not replace this with a poll wait.
    // Claims follow nudges at most every NUDGE_MS: under thousands of creates a second, one claim
    // per create would cost the creates themselves (every claim is a write).
    this.again = true;
    if (!this.ticking) this.schedule(Math.max(0, this.lastClaim + NUDGE_MS - Date.now()));
  }

  /** Stops claiming; waits for the deliveries in flight (each bounded by the timeout). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    // A claim still under way launches what it claimed: wait for it, then for every send.
    await this.tickRun;
    await this.renewRun;
    // Claimed and not sent: their leases run out, and they are sent again by whoever claims them
    // (the log windows they were in with them).
    for (const queue of this.waiting.values()) for (const { job } of queue) this.letGo(job);
    this.waiting.clear();
    this.waitingTotal = 0;
    await Promise.allSettled([...this.sending]);
    // The windows with nothing left outstanding end their leases now.
    for (const w of this.windows.values()) if (w.entries.length === 0) w.dirty = true;
    await this.flush();
    this.pool?.destroy();
  }

  /** Runs a tick in `ms`, unless one is already due sooner. */
  private schedule(ms: number): void {
    const at = Date.now() + ms;
    if (this.timer && this.due <= at) return;
    clearTimeout(this.timer);
    this.due = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.tick();
    }, ms);
    this.timer.unref();
  }

  private tick(): Promise<void> {
    if (this.ticking) return Promise.resolve();
    this.tickRun = this.claimAndLaunch();
    return this.tickRun;
  }

  private async claimAndLaunch(): Promise<void> {
    this.ticking = true;
    try {
      for (;;) {
        this.again = false;
        // Up to CLAIM_AHEAD × concurrency held in all: a delivery claimed while its endpoint's slots
        // are taken waits for one, so a busy endpoint's next deliveries go out as soon as a slot
        // frees, not a claim later. Of those, no more waiting than the slots start in WAIT_TARGET_MS
        // at the pace they have been freeing.
        const ahead = Math.min(
          (CLAIM_AHEAD - 1) * this.concurrency,
          Math.floor((this.concurrency * WAIT_TARGET_MS) / Math.max(this.slotMs, 1)),
        );
        // What waits of an endpoint whose every slot is slow to answer waits for those, not for the
        // process's: the pace leaves it out. Endpoints slow to answer hold at most
        // (CLAIM_AHEAD - 1) × concurrency between them: past that they are left out of the claims,
        // so the rest of what a process may hold goes to endpoints that answer.
        let waitingShared = this.waitingTotal;
        let slowHeld = 0;
        for (const [id, n] of this.slowBy) {
          const waiting = this.waiting.get(id)?.length ?? 0;
          if (n >= this.perEndpoint) waitingShared -= waiting;
          slowHeld += (this.inflight.get(id) ?? 0) + waiting;
        }
        const free = Math.min(
          this.concurrency + ahead - this.inflightTotal - waitingShared,
          CLAIM_AHEAD * this.concurrency - this.inflightTotal - this.slowTotal - this.waitingTotal,
        );
        if (free <= 0 || this.stopped) break;
        // Endpoints holding ENDPOINT_HOLD × perEndpoint are left out of the claim.
        const hold = ENDPOINT_HOLD * this.perEndpoint;
        const busy = [...this.inflight.keys(), ...this.waiting.keys()].filter(
          (id) => (this.inflight.get(id) ?? 0) + (this.waiting.get(id)?.length ?? 0) >= hold,
        );
        const nowMs = Date.now();
        const clockNow = this.clock();
        for (const [id, until] of this.holdOff) {
          if (until <= clockNow) this.holdOff.delete(id);
          else busy.push(id);
        }
        if (slowHeld >= (CLAIM_AHEAD - 1) * this.concurrency) busy.push(...this.slowBy.keys());
        const skip = new Set(busy);
        // Every window still held (and not skipped) is read on from where it reaches.
        const windows: Record<string, string> = {};
        const passedWindows = new Map<string, LogWindow>();
        for (const [id, w] of this.windows) {
          if (skip.has(id)) continue;
          windows[id] = w.reach;
          passedWindows.set(id, w);
        }
        this.lastClaim = nowMs;
        this.claiming = true;
        let claim: Awaited<ReturnType<Store['claimDeliveries']>>;
        const leaseUntil = clockNow + this.leaseMs;
        try {
          claim = await this.opts.store.claimDeliveries({
            now: new Date(clockNow),
            leaseMs: this.leaseMs,
            leaseOwner: this.id,
            limit: free,
            perEndpoint: hold,
            skipEndpoints: [...skip],
            ownerLoad: this.ownerLoad(),
            windows,
          });
        } finally {
          this.claiming = false;
        }
        this.track(claim, passedWindows, leaseUntil);
        for (const job of claim.jobs) this.launch(job, leaseUntil);
        // Claimed all it could: more may be waiting. Otherwise a nudge that came meanwhile is
        // answered NUDGE_MS after this claim (finally, below), not at once: under a stream of
        // answers and commits, claims back to back would hold the store's write lock most of the time.
        if (claim.jobs.length < free) break;
      }
    } catch (err) {
      this.opts.warn?.({ err }, 'webhook dispatcher could not claim deliveries; retrying');
    } finally {
      this.ticking = false;
      if (!this.stopped) {
        this.schedule(
          this.again ? Math.max(0, this.lastClaim + NUDGE_MS - Date.now()) : (this.opts.pollMs ?? 1_000),
        );
      }
    }
  }

  /**
   * Adds a claim's jobs from the log to their endpoints' windows, in log order, and takes how far
   * each window now reaches. A window that was passed to the claim and is not in its answer is no
   * longer this process's (its endpoint was disabled, or its lease ran out and was taken): its
   * jobs still go out, and report no progress.
   */
  private track(
    claim: Awaited<ReturnType<Store['claimDeliveries']>>,
    passed: Map<string, LogWindow>,
    leaseUntil: number,
  ): void {
    for (const [id, w] of passed) if (!(id in claim.windows) && this.windows.get(id) === w) this.drop(id);
    for (const [id, reach] of Object.entries(claim.windows)) {
      let w = this.windows.get(id);
      const before = passed.get(id);
      if (before && w !== before && this.dropped.has(before)) {
        // Let go while the claim ran (not ended by its record): not taken up again (what the claim gave of it goes out
        // untracked, its position left as it is), and left until the lease the claim may have
        // given it has run out.
        this.holdOffUntil(id, leaseUntil);
        continue;
      }
      if (!w) {
        // Not passed to the claim, so leased by it (store/ports/events.ts, claimDeliveries).
        w = {
          endpointId: id,
          reach,
          entries: [],
          writes: 0,
          dirty: false,
          leaseEnd: leaseUntil,
          leaseMax: leaseUntil,
        };
        this.windows.set(id, w);
      }
      w.reach = reach;
      // A window passed to the claim may have been leased again by it, or answered as it was.
      w.leaseMax = Math.max(w.leaseMax, leaseUntil);
    }
    for (const job of claim.jobs) {
      if (job.id !== null) continue;
      const w = this.windows.get(job.endpoint.id);
      if (!w) continue; // no lease reported: sent all the same (at least once)
      const entry = { window: w, position: job.event.position, recording: false };
      w.entries.push(entry);
      this.entries.set(job, entry);
    }
    // A window that reached further with nothing outstanding: its position is reported (and its
    // lease ended) with the next record.
    for (const id of Object.keys(claim.windows)) {
      const w = this.windows.get(id);
      if (w && w.entries.length === 0 && w.writes === 0) {
        w.dirty = true;
        this.recordSoon();
      }
    }
  }

  /** Leaves an endpoint out of the claims until `until` (this.clock), or later if already so. */
  private holdOffUntil(endpointId: string, until: number): void {
    this.holdOff.set(endpointId, Math.max(this.holdOff.get(endpointId) ?? 0, until));
  }

  /** Forgets an endpoint's window: what it holds reports no progress; its lease runs out. */
  private drop(endpointId: string): void {
    const w = this.windows.get(endpointId);
    if (w) this.dropped.add(w);
    this.windows.delete(endpointId);
  }

  /** A claimed job not sent: a log job's window is let go, and sent again once its lease ran out. */
  private letGo(job: DeliveryJob): void {
    const entry = this.entries.get(job);
    if (!entry) return;
    this.entries.delete(job);
    if (this.windows.get(job.endpoint.id) === entry.window) this.letGoWindow(entry.window);
  }

  /** Drops a window this process still holds, its endpoint left until its lease may have run out. */
  private letGoWindow(w: LogWindow): void {
    this.drop(w.endpointId);
    this.holdOffUntil(w.endpointId, w.leaseMax);
  }

  /**
   * Whether a waiting job's lease still covers an attempt (the timeout and RECORD_MARGIN_MS): its
   * claim's, or for a job of the log, its window's as renewed since (while the window is still held).
   */
  private covered(job: DeliveryJob, until: number): boolean {
    const end = Math.max(until, this.heldWindow(job)?.leaseEnd ?? until);
    return end - this.clock() >= this.opts.timeoutMs + RECORD_MARGIN_MS;
  }

  /**
   * Whether a job is a queued delivery whose lease (until) has not run out and that the store has
   * not refused to renew. One whose lease has run out may have been claimed again, by another
   * process or by this one (a job of its own besides this one): it is let go, never renewed.
   */
  private renewable(job: DeliveryJob, until: number): boolean {
    return job.id !== null && until > this.clock() && !this.refused.has(job);
  }

  /** The log window of a job, while this process still holds it. */
  private heldWindow(job: DeliveryJob): LogWindow | undefined {
    const w = this.entries.get(job)?.window;
    return w && this.windows.get(job.endpoint.id) === w ? w : undefined;
  }

  /** Deliveries this process holds (in flight or waiting for a slot), by endpoint owner. */
  private ownerLoad(): Record<string, number> {
    const load: Record<string, number> = Object.fromEntries(this.ownerInflight);
    for (const queue of this.waiting.values())
      for (const { job } of queue) load[job.endpoint.owner] = (load[job.endpoint.owner] ?? 0) + 1;
    return load;
  }

  /** Sends the job now if its endpoint and this process have a slot free; otherwise it waits for one. */
  private launch(job: DeliveryJob, until: number): void {
    const endpointId = job.endpoint.id;
    if ((this.inflight.get(endpointId) ?? 0) >= this.perEndpoint || this.inflightTotal >= this.concurrency) {
      const queue = this.waiting.get(endpointId);
      if (queue) queue.push({ job, until });
      else this.waiting.set(endpointId, [{ job, until }]);
      this.waitingTotal++;
      return;
    }
    this.send(job);
  }

  /**
   * Sends waiting deliveries into the slots free now, one at a time to the owner with the fewest in
   * flight whose endpoint has a slot (endpoints of one owner in turn): a user with many endpoints
   * and a long backlog takes no more turns than one with a single delivery waiting.
   */
  private pump(): void {
    while (this.waitingTotal > 0 && this.inflightTotal < this.concurrency) {
      let best: string | undefined;
      let bestLoad = Number.POSITIVE_INFINITY;
      for (const [id, queue] of this.waiting) {
        if ((this.inflight.get(id) ?? 0) >= this.perEndpoint || this.renewing.has(id)) continue;
        const load = this.ownerInflight.get(queue[0]!.job.endpoint.owner) ?? 0;
        if (load < bestLoad) {
          best = id;
          bestLoad = load;
        }
      }
      if (best === undefined) break;
      const queue = this.waiting.get(best)!;
      const head = queue[0]!;
      const covered = this.covered(head.job, head.until);
      if (!covered && !this.stopped && (this.heldWindow(head.job) || this.renewable(head.job, head.until))) {
        // Its window, or a queued delivery's own lease, is still this process's: it is renewed
        // first (the process was stopped, say, while the records that renew a window would have
        // been written, or a retry waited behind its endpoint's slots).
        this.renew(best);
        continue;
      }
      const next = queue.shift()!;
      this.waitingTotal--;
      // Its endpoint goes to the back of the line: the owner's other endpoints come first next time.
      this.waiting.delete(best);
      if (queue.length > 0) this.waiting.set(best, queue);
      if (covered) this.send(next.job);
      else {
        // A queued delivery the store would not renew is another process's now; one of the log
        // takes its window's unrecorded deliveries with it (sent again). Either is warned about.
        this.lateCount++;
        this.letGo(next.job);
      }
    }
    if (this.lateCount > 0 && this.clock() - this.lateWarned >= 60_000) {
      this.opts.warn?.(
        { deliveries: this.lateCount },
        'webhook deliveries waited for a slot until their lease no longer covered an attempt: let go unsent, sent again once their leases run out',
      );
      this.lateCount = 0;
      this.lateWarned = this.clock();
    }
  }

  /**
   * Renews the lease of an endpoint's window, and of its waiting queued deliveries that their lease
   * no longer covers, before they are sent: the endpoints asked for meanwhile go in one statement,
   * their queued deliveries in another. Each one the store renews (its lease still this process's)
   * is sent from as before; each one it does not, or all when a statement fails, is let go (what
   * waits of it is let go as pump comes to it).
   */
  private renew(endpointId: string): void {
    this.renewing.add(endpointId);
    // Begun on the next microtask, so that renewRun is set before the loop can end and clear it.
    this.renewRun ??= Promise.resolve().then(() => this.renewAll());
  }

  /** Renews what renew asked for, statement after statement, until nothing more is asked. */
  private async renewAll(): Promise<void> {
    try {
      for (;;) {
        // Each round's are removed from renewing once answered: what is left was asked for since.
        const asked = [...this.renewing];
        if (asked.length === 0 || this.stopped) return;
        const now = this.clock();
        const until = now + this.leaseMs;
        // Of the endpoints asked for, the windows a waiting delivery needs renewed, and the queued
        // deliveries waiting whose own lease no longer covers them (and has not run out).
        const uncovered = new Map(
          asked.map((id) => [id, (this.waiting.get(id) ?? []).filter((w) => !this.covered(w.job, w.until))]),
        );
        const windows = new Map<string, LogWindow>();
        for (const [id, list] of uncovered) {
          const w = this.windows.get(id);
          if (w && list.some((x) => this.heldWindow(x.job) === w)) windows.set(id, w);
        }
        for (const w of windows.values()) w.leaseMax = Math.max(w.leaseMax, until);
        const queued = [...uncovered.values()].flat().filter((w) => this.renewable(w.job, w.until));
        const [a, b] = await Promise.allSettled([
          windows.size === 0
            ? []
            : this.opts.store.renewLeases({
                owner: this.id,
                endpoints: [...windows.keys()],
                until: new Date(until),
              }),
          queued.length === 0
            ? []
            : this.opts.store.renewQueuedLeases({
                owner: this.id,
                deliveries: queued.map((w) => w.job.id!),
                now: new Date(now),
                until: new Date(until),
              }),
        ]);
        for (const r of [a, b]) {
          if (r.status === 'rejected')
            this.opts.warn?.(
              { err: r.reason },
              'webhook dispatcher could not renew its leases; letting them go',
            );
        }
        const renewed = new Set(a.status === 'fulfilled' ? a.value : []);
        const renewedQueued = new Set(b.status === 'fulfilled' ? b.value : []);
        for (const w of queued) {
          if (renewedQueued.has(w.job.id!)) w.until = Math.max(w.until, until);
          else this.refused.add(w.job);
        }
        for (const id of asked) this.renewing.delete(id);
        for (const [id, w] of windows) {
          if (this.windows.get(id) !== w) continue;
          if (renewed.has(id)) w.leaseEnd = Math.max(w.leaseEnd, until);
          else this.letGoWindow(w);
        }
        if (!this.stopped) this.pump();
      }
    } finally {
      // Runs as the loop returns, in the same turn: a renew asked for after that starts anew.
      this.renewRun = undefined;
      this.renewing.clear();
    }
  }

  private send(job: DeliveryJob): void {
    const endpointId = job.endpoint.id;
    const owner = job.endpoint.owner;
    this.inflight.set(endpointId, (this.inflight.get(endpointId) ?? 0) + 1);
    this.ownerInflight.set(owner, (this.ownerInflight.get(owner) ?? 0) + 1);
    this.inflightTotal++;
    const sentAt = this.clock();
    let released = false;
    // A receiver slow to answer gives the process's slot back (SLOW_SLOT_MS); the slot's time is
    // what the pace (slotMs) counts.
    let slow: NodeJS.Timeout | undefined = setTimeout(() => {
      slow = undefined;
      if (released) return;
      this.inflightTotal--;
      this.slowTotal++;
      this.slowBy.set(endpointId, (this.slowBy.get(endpointId) ?? 0) + 1);
      this.slotMs += (SLOW_SLOT_MS - this.slotMs) / 8;
      if (!this.stopped) this.pump();
      this.nudge();
    }, SLOW_SLOT_MS);
    slow.unref();
    // The slot is free once the receiver has answered: the delivery stays leased to this process
    // until its attempt is recorded, so no claim can take it meanwhile.
    const release = () => {
      if (released) return;
      released = true;
      if (slow === undefined) {
        this.slowTotal--;
        countDown(this.slowBy, endpointId);
      } else {
        clearTimeout(slow);
        this.inflightTotal--;
        this.slotMs += (this.clock() - sentAt - this.slotMs) / 8;
      }
      countDown(this.inflight, endpointId);
      countDown(this.ownerInflight, owner);
      if (!this.stopped) this.pump();
      this.nudge(); // a slot is free
    };
    const p = this.deliver(job, release)
      .catch((err) => this.opts.warn?.({ err, delivery: job.id }, 'webhook delivery could not be recorded'))
      .finally(() => {
        release();
        this.sending.delete(p);
      });
    this.sending.add(p);
  }

  private async deliver(job: DeliveryJob, release: () => void): Promise<void> {
    const { endpoint, event } = job;
    const started = this.clock();
    const body = JSON.stringify(eventPayload(event));
    const timestamp = Math.floor(started / 1000);
    const secrets = [endpoint.secret];
    if (
      endpoint.previousSecret &&
      endpoint.previousSecretUntil &&
      endpoint.previousSecretUntil.getTime() > started
    ) {
      secrets.push(endpoint.previousSecret);
    }
    const headers = {
      'webhook-id': event.id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signWebhook(secrets, event.id, timestamp, body),
    };
    const post = () =>
      postWebhook(endpoint.url, {
        body,
        // Traces on: the POST carries the delivery span's traceparent.
        headers: traces ? { ...headers, ...traces.headers() } : headers,
        timeoutMs: this.opts.timeoutMs,
        allowPrivate: this.opts.allowPrivate,
        ...(this.opts.resolver ? { resolver: this.opts.resolver } : {}),
        ...(this.pool ? { pool: this.pool } : {}),
      });
    // Traces on (contract 14.1): a client span in the trace of the request that wrote the event.
    const traces = tracing();
    const result = traces
      ? await traces.span(
          'webhook delivery',
          { 'webhook.event.type': event.type, 'webhook.attempt': job.attempts + 1 },
          post,
          { parent: job.traceparent ?? null },
        )
      : await post();
    release();
    const now = this.clock();
    const attempt = job.attempts + 1;
    const verdict = this.judge(job, result, attempt, now);
    this.opts.onAttempt?.(verdict.outcome);
    await this.record(job, {
      deliveryId: job.id,
      leaseOwner: this.id,
      disableEndpoint: verdict.disable,
      attempt: {
        deliveryId: job.id,
        endpointId: endpoint.id,
        eventId: event.id,
        eventType: event.type,
        attempt,
        at: new Date(now),
        status: result.kind === 'response' ? result.status : null,
        outcome: verdict.outcome,
        error: verdict.error,
        durationMs: result.kind === 'refused' ? 0 : result.durationMs,
        nextAttemptAt: verdict.next === null ? null : new Date(verdict.next),
      },
    });
  }

  /**
   * Records an attempt: with every other that ended while the last lot was being written, in one
   * write (at most one is under way), so a commit's wait is shared rather than paid per delivery.
   * The log windows' progress goes in the same write.
   */
  private record(job: DeliveryJob, f: FinishedAttempt): Promise<void> {
    const entry = this.entries.get(job);
    this.entries.delete(job);
    return new Promise<void>((resolve, reject) => {
      this.finished.push({
        f,
        ...(entry ? { entry } : {}),
        done: (err) => (err === undefined ? resolve() : reject(err)),
      });
      this.recordSoon();
    });
  }

  /** Writes what is finished (and the windows' progress) after this turn's other answers came in. */
  private recordSoon(): void {
    if (this.recording) return;
    this.recording = true;
    const wait = this.lastRecord + RECORD_EVERY_MS - Date.now();
    if (wait > 0 && !this.stopped) setTimeout(() => this.writeFinished(), wait);
    else setImmediate(() => this.writeFinished());
  }
  private lastRecord = 0;

  /** Records the last lot, and any windows' progress; resolves when nothing is left to write. */
  private flush(): Promise<void> {
    if (!this.recording && this.finished.length === 0 && ![...this.windows.values()].some((w) => w.dirty))
      return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.flushed.push(resolve);
      this.recordSoon();
    });
  }
  private flushed: (() => void)[] = [];

  /**
   * How far each window got: the last event of the recorded prefix of its entries (those before
   * the first still outstanding), or its reach when none is outstanding, with its lease ended,
   * unless a claim under way may be adding to it (then the lease is kept, and ended by a later record).
   */
  private progress(now: number): {
    progress: LogProgress[];
    windows: LogWindow[];
    renewed: ({ until: number; before: number } | null)[];
  } {
    const progress: LogProgress[] = [];
    const windows: LogWindow[] = [];
    // For each window, the lease end this record gives it and the end known before it: the new
    // end counts once the record is written before the old one (the lease still held, so no other
    // process could have taken it and the record's renewal took).
    const renewed: ({ until: number; before: number } | null)[] = [];
    for (const w of this.windows.values()) {
      let position: string | undefined;
      while (w.entries[0]?.recording) position = w.entries.shift()!.position;
      // Nothing recorded, and a window that had reached further with nothing outstanding has been
      // given events since (claimed after it was marked): those report its progress when recorded.
      if (position === undefined && (!w.dirty || w.entries.length > 0)) {
        w.dirty = false;
        continue;
      }
      w.dirty = false;
      const end = w.entries.length === 0 && !this.claiming && !this.ticking;
      const until = now + this.leaseMs;
      progress.push({
        endpointId: w.endpointId,
        leaseOwner: this.id,
        position: w.entries.length === 0 ? w.reach : (position as string),
        leaseUntil: end ? null : new Date(until),
      });
      if (!end) w.leaseMax = Math.max(w.leaseMax, until);
      renewed.push(end ? null : { until, before: w.leaseEnd });
      w.writes++;
      windows.push(w);
    }
    return { progress, windows, renewed };
  }

  private writeFinished(): void {
    const lot = this.finished;
    this.finished = [];
    for (const x of lot) if (x.entry) x.entry.recording = true;
    const { progress, windows, renewed } = this.progress(this.clock());
    if (lot.length === 0 && progress.length === 0) {
      this.recording = false;
      for (const resolve of this.flushed.splice(0)) resolve();
      return;
    }
    this.lastRecord = Date.now();
    const next = () => {
      this.recording = false;
      this.recordSoon();
    };
    this.opts.store
      .finishDeliveries(
        lot.map((x) => x.f),
        progress,
      )
      .then(
        () => {
          const written = this.clock();
          windows.forEach((w, i) => {
            const r = renewed[i];
            if (r && written < r.before) w.leaseEnd = Math.max(w.leaseEnd, r.until);
          });
          for (const w of windows) {
            w.writes--;
            // Ended: nothing outstanding, and its lease was let go with its position.
            if (w.entries.length === 0 && w.writes === 0 && this.windows.get(w.endpointId) === w) {
              const p = progress.find((x) => x.endpointId === w.endpointId);
              // Kept for a claim that was under way: the claim answers how far the window reaches,
              // and the next record ends it (or stop() does).
              if (p?.leaseUntil === null) this.windows.delete(w.endpointId);
            }
          }
          for (const x of lot) x.done();
          next();
        },
        (err: unknown) => {
          // Not written: these windows' events come again from their endpoints' positions once their
          // leases have run out (at least once).
          for (const w of windows) {
            w.writes--;
            if (this.windows.get(w.endpointId) === w) this.letGoWindow(w);
          }
          for (const x of lot) x.done(err ?? new Error('could not record'));
          next();
        },
      );
    // The next claim, if one is wanted, goes with this record (after it): writes made in one turn
    // share a transaction (and its commit) on SQLite.
    if (this.again && !this.ticking && !this.stopped) {
      clearTimeout(this.timer);
      this.timer = undefined;
      void this.tick();
    }
  }

  /** What an attempt's result means: done, retry when, or give up; and whether to disable the endpoint. */
  private judge(job: DeliveryJob, r: PostResult, attempt: number, now: number) {
    if (r.kind === 'response' && r.status >= 200 && r.status < 300) {
      return { outcome: 'succeeded' as const, next: null, error: null, disable: null };
    }
    const error =
      r.kind === 'response'
        ? `the receiver answered ${r.status}`
        : `${r.kind === 'refused' ? 'refused' : 'failed'}: ${r.reason}`;
    if (r.kind === 'response' && r.status === 410) {
      return { outcome: 'failed' as const, next: null, error, disable: 'the receiver answered 410 Gone' };
    }
    // Failing since the first failure after the last success (this one, if the endpoint was not failing).
    const failingSince = job.endpoint.failingSince?.getTime() ?? now;
    const disable = now - failingSince >= FAILING_DISABLE_MS ? 'every delivery failed for 5 days' : null;
    const step = this.opts.schedule[attempt - 1];
    if (step === undefined || disable) return { outcome: 'failed' as const, next: null, error, disable };
    let wait = step + step * 0.1 * this.jitter();
    const asked = r.kind === 'response' ? r.retryAfterMs : null;
    if (asked !== null && asked > wait) wait = Math.min(asked, 86_400_000);
    return { outcome: 'retrying' as const, next: now + wait, error, disable: null };
  }
}
