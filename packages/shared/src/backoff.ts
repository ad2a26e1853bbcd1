/**
 * The one retry schedule: exponential backoff with "equal jitter", half the
 * delay fixed and half random, so clients that failed together do not come
 * back together. The flusher (a failing span store), the quota reconciler (a
 * failing key store) and the SDK (a failing server; its own copy, held equal
 * by a test, as it has no runtime dependency) all wait this long.
 */
export function backoffMs(attempt: number, bounds: { minMs: number; maxMs: number }, random: () => number = Math.random): number {
  const base = Math.min(bounds.maxMs, bounds.minMs * 2 ** Math.min(attempt, 30));
  return Math.round(base / 2 + random() * (base / 2));
}
