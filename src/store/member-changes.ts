import type { MemberEventData, MemberEventType, Role } from './store.js';

// What every engine writes of a membership change's event (contract 13.3), decided in one place so
// the engines cannot differ on it.

/**
 * The event of `user`'s role in `garden` going from `was` to `now` (null: no member): added,
 * changed (with the former role as `previous`), removed (with the role it had); null when the role
 * stays as it was, which makes no event.
 */
export function memberChange(
  garden: string,
  user: string,
  was: Role | null,
  now: Role | null,
): { type: MemberEventType; data: MemberEventData } | null {
  if (was === now) return null;
  if (was === null) return { type: 'member.added', data: { garden, user, role: now! } };
  if (now === null) return { type: 'member.removed', data: { garden, user, role: was } };
  return { type: 'member.changed', data: { garden, user, role: now, previous: was } };
}
