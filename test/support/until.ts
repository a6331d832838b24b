/** Wait until `cond` holds, checking every 20 ms; throws after `ms`. Returns how long it took. */
export async function until(cond: () => boolean | Promise<boolean>, ms = 15_000): Promise<number> {
  const started = Date.now();
  while (!(await cond())) {
    if (Date.now() - started > ms) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return Date.now() - started;
}
