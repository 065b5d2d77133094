/**
 * How many exports run at once in this process: at most `perUser` for one user and `total` for
 * everyone (0: no limit). An export holds its place from the snapshot's first read until its
 * answer has been sent or abandoned, so slow readers cannot pile up past the limits.
 */
import { countDown } from '../counts.js';

export class ExportSlots {
  private readonly byUser = new Map<string, number>();
  private running = 0;

  constructor(
    readonly perUser: number,
    readonly total: number,
  ) {}

  /** A place for one more export of `user` (released once, by the function returned), or which limit it is over. */
  take(user: string): { release: () => void } | 'user' | 'total' {
    const mine = this.byUser.get(user) ?? 0;
    if (this.perUser > 0 && mine >= this.perUser) return 'user';
    if (this.total > 0 && this.running >= this.total) return 'total';
    this.byUser.set(user, mine + 1);
    this.running++;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.running--;
        countDown(this.byUser, user);
      },
    };
  }
}
