import fs from 'node:fs/promises';

/**
 * What /readyz checks: each dependency the request path needs, all at once,
 * each bounded by the same timeout, so a frozen database answers "not ready,
 * PostgreSQL did not answer" within the timeout instead of hanging the probe.
 * A check still running when the next probe comes is joined, not started
 * again: a probe every second against a hung dependency holds one call, not
 * one per probe.
 */
export type ReadyCheck = () => Promise<void> | void;

export class NotReadyError extends Error {
  constructor(
    /** What each dependency said: 'ok', or why it is not ready. */
    readonly checks: Record<string, string>,
  ) {
    super(
      Object.entries(checks)
        .filter(([, v]) => v !== 'ok')
        .map(([k, v]) => `${k}: ${v}`)
        .join('; '),
    );
    this.name = 'NotReadyError';
  }
}

export class Readiness {
  private readonly running = new Map<string, { run: Promise<void>; startedAt: number }>();

  constructor(
    private readonly checks: Readonly<Record<string, ReadyCheck>>,
    private readonly timeoutMs: number,
  ) {}

  /** Resolves when every check passed within the timeout; otherwise throws NotReadyError naming each one that did not. */
  async check(): Promise<void> {
    const names = Object.keys(this.checks);
    const results = await Promise.all(names.map((n) => this.one(n)));
    const out: Record<string, string> = {};
    names.forEach((n, i) => (out[n] = results[i]!));
    if (results.some((r) => r !== 'ok')) throw new NotReadyError(out);
  }

  private async one(name: string): Promise<string> {
    const now = performance.now();
    let entry = this.running.get(name);
    // A check that never settles (a call without a bound of its own) is not joined for ever: a later probe tries anew.
    if (entry === undefined || now - entry.startedAt > this.timeoutMs * 5) {
      const started = { run: Promise.resolve(), startedAt: now };
      started.run = (async () => this.checks[name]!())().finally(() => {
        if (this.running.get(name) === started) this.running.delete(name);
      });
      this.running.set(name, started);
      entry = started;
    }
    const run = entry.run;
    let t: NodeJS.Timeout | undefined;
    const late = new Promise<string>((resolve) => {
      t = setTimeout(() => resolve(`did not answer within ${this.timeoutMs} ms`), this.timeoutMs);
    });
    try {
      return await Promise.race([
        run.then(
          () => 'ok',
          (e: unknown) => (e instanceof Error ? e.message : String(e)),
        ),
        late,
      ]);
    } finally {
      clearTimeout(t);
    }
  }
}

/** Below this many free file handles the server is not ready: every flush, segment and connection needs one. */
export const FILE_HANDLE_RESERVE = 16;

/**
 * File handles left to the process under its soft limit (Linux: /proc/self), or
 * undefined where that cannot be read; opening the directory itself fails with
 * EMFILE when none is left.
 */
export async function fileHandlesLeft(): Promise<number | undefined> {
  let limits: string;
  try {
    limits = await fs.readFile('/proc/self/limits', 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EMFILE' || (e as NodeJS.ErrnoException).code === 'ENFILE') throw e;
    return undefined;
  }
  const soft = /^Max open files\s+(\d+|unlimited)/m.exec(limits)?.[1];
  if (soft === undefined || soft === 'unlimited') return undefined;
  const limit = Number(soft);
  // Descriptors at or above the limit (inherited) do not take a place below it.
  const inUse = (await fs.readdir('/proc/self/fd')).map(Number).filter((fd) => fd < limit).length;
  return limit - inUse;
}

/** The /readyz check of file handles: throws when fewer than FILE_HANDLE_RESERVE are left. */
export async function checkFileHandles(probeDir: string): Promise<void> {
  const left = await fileHandlesLeft();
  if (left !== undefined && left < FILE_HANDLE_RESERVE)
    throw new Error(`only ${left} file handles left under the process's limit (ulimit -n): flushes and new connections fail with EMFILE`);
  // Elsewhere: a handle can still be opened.
  if (left === undefined) await (await fs.open(probeDir, 'r')).close();
}
