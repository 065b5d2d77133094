// The one shape of a write that may be refused, in every port.

/**
 * What a write answers: what it wrote (`ok`), or why it wrote nothing (`refused`, one of its
 * domain's reasons). A refusal changed nothing; a few carry what the write found instead.
 */
export type Change<T, R extends string> = { ok: T } | { refused: R };

/** A refused write's answer, with what the write found when its reason says there is more to know. */
export function refused<R extends string>(why: R): { refused: R };
export function refused<R extends string, D extends object>(why: R, found: D): { refused: R } & D;
export function refused(why: string, found?: object): { refused: string } {
  return { refused: why, ...found };
}
