/**
 * Takes one from a count kept per key, forgetting the key at zero (a key absent counts as 1): the
 * per-user and per-endpoint counts of what is running (streams, exports, webhook deliveries).
 */
export function countDown<K>(counts: Map<K, number>, key: K): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left <= 0) counts.delete(key);
  else counts.set(key, left);
}
