// Durations as the contract writes them (CONTRACT.md section 7): shared by configuration, token
// lifetimes and webhook schedules, so they belong to none of them.

const DURATION = /^(0|[1-9][0-9]{0,9})(ms|[smhd])$/;
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * Parses `30d`, `12h`, `15m`, `45s` (and `250ms`, `0s` when asked) into milliseconds; null when
 * malformed. Token lifetimes take whole seconds and up; server settings also take ms and zero.
 */
export function parseDuration(text: string, opts: { ms?: boolean; zero?: boolean } = {}): number | null {
  const m = DURATION.exec(text);
  if (!m || (m[2] === 'ms' && !opts.ms) || (m[1] === '0' && !opts.zero)) return null;
  const ms = Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  return Number.isSafeInteger(ms) && ms <= 100 * 365 * UNIT_MS.d ? ms : null;
}
