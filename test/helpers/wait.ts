/**
 * Asks `probe` every 20 ms until it gives something other than undefined or false, and returns
 * that; throws, naming `what`, when `ms` pass first. Tests wait for the thing itself this way,
 * never for a fixed time.
 */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  ms = 10_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const got = await probe();
    if (got !== undefined && got !== false) return got;
    if (Date.now() >= deadline) throw new Error(`gave up after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
