// Polling for eventual conditions in integration tests: the systems under test are asynchronous by
// design, so tests wait for a state (with a deadline and a description of what never happened).
export async function eventually<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 20_000, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? ` (last error: ${(lastError as Error).message})` : ''}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
