/** One HTTP answer and how long it took; a request cut by its own timeout is status 0. */
export interface Timed {
  ms: number;
  status: number;
  retryAfter: string | null;
  body: Record<string, unknown>;
}

export async function timedFetch(url: string, init: RequestInit = {}, timeoutMs = 10_000): Promise<Timed> {
  const started = performance.now();
  try {
    const r = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
    const text = await r.text();
    let body: Record<string, unknown> = {};
    try {
      body = JSON.parse(text) as Record<string, unknown>;
    } catch {
      body = { text };
    }
    return { ms: performance.now() - started, status: r.status, retryAfter: r.headers.get('retry-after'), body };
  } catch {
    return { ms: performance.now() - started, status: 0, retryAfter: null, body: {} };
  }
}

/** POST /ingest of a v1 payload with this key. */
export function timedIngest(baseUrl: string, key: string, payload: unknown, timeoutMs?: number): Promise<Timed> {
  return timedFetch(
    `${baseUrl}/ingest`,
    { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(payload) },
    timeoutMs,
  );
}
