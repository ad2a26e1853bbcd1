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
  private readonly running = new Map<string, Promise<void>>();

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
    let run = this.running.get(name);
    if (run === undefined) {
      run = (async () => this.checks[name]!())().finally(() => this.running.delete(name));
      this.running.set(name, run);
    }
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
