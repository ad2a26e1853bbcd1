/**
 * One shutdown per signal event. Ctrl-C in a terminal and a process manager
 * that signals the whole process group deliver SIGINT/SIGTERM to every
 * process of the group, and each parent (npm, `trace-ingest serve`) forwards
 * what it got to its child as well: the server sees one event two or three
 * times within a few milliseconds. Copies that arrive within `repeatMs` of
 * the first signal are that same event; a signal after that is a new,
 * deliberate one (a second Ctrl-C to stop waiting for the drain).
 */

export const SHUTDOWN_SIGNALS = ['SIGTERM', 'SIGINT'] as const;
export type ShutdownSignal = (typeof SHUTDOWN_SIGNALS)[number];

/** Forwarded copies arrive within milliseconds; a person pressing Ctrl-C again takes longer. */
export const SIGNAL_REPEAT_MS = 500;

export interface SignalHandlers {
  /** The first signal event. */
  first(signal: ShutdownSignal): void;
  /** Every signal event after the first. */
  again(signal: ShutdownSignal): void;
  /** A copy of the current event, ignored. */
  copy?(signal: ShutdownSignal): void;
}

/** Sorts signals into events by the time since the first one; `now` is for tests. */
export class SignalEvents {
  private firstAt: number | undefined;

  constructor(
    private readonly handlers: SignalHandlers,
    private readonly repeatMs: number = SIGNAL_REPEAT_MS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  receive(signal: ShutdownSignal): void {
    const at = this.now();
    if (this.firstAt === undefined) {
      this.firstAt = at;
      this.handlers.first(signal);
    } else if (at - this.firstAt < this.repeatMs) {
      this.handlers.copy?.(signal);
    } else {
      this.handlers.again(signal);
    }
  }
}

/** Listens for SIGTERM/SIGINT on the process; returns the function that stops listening. */
export function onShutdownSignals(handlers: SignalHandlers, repeatMs?: number): () => void {
  const events = new SignalEvents(handlers, repeatMs);
  const listeners = SHUTDOWN_SIGNALS.map((sig) => [sig, () => events.receive(sig)] as const);
  for (const [sig, fn] of listeners) process.on(sig, fn);
  return () => {
    for (const [sig, fn] of listeners) process.off(sig, fn);
  };
}
