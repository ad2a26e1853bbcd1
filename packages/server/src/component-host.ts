/** What the host logs: a part that fails to close, and each part's start and close at debug level. */
export interface HostLogger {
  debug(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * One long-lived part of a process. `start` opens what the part holds and,
 * when it throws, leaves nothing of its own open (the host closes only the
 * parts whose start returned); `close` releases what `start` opened.
 * Either may be left out: a step of the start-up with nothing to close, or a
 * part that only has something to do at shutdown.
 */
export interface Component {
  readonly name: string;
  start?: () => Promise<void> | void;
  close?: () => Promise<void> | void;
}

/**
 * Starts parts in the order they were added and closes them in reverse (the
 * OpenTelemetry Collector's host, fastify's onClose). A part that fails to
 * start closes the ones already started, last first, and its error is
 * rethrown; a part that fails to close is logged and the rest still close.
 */
export class ComponentHost {
  private readonly parts: Component[] = [];
  /** The parts whose start returned, in start order; each is closed once, taken off the end. */
  private readonly started: Component[] = [];
  private starting: Promise<void> | undefined;
  private closing: Promise<void> | undefined;

  constructor(private readonly logger: HostLogger) {}

  /** Adds a part to start after those added before it (and to close before them). */
  add(part: Component): void {
    if (this.starting !== undefined) throw new Error(`component "${part.name}" added after the host started`);
    this.parts.push(part);
  }

  /** Starts every part in order; once only. After a failure nothing the host started is left open. */
  start(): Promise<void> {
    if (this.starting !== undefined) throw new Error('the component host starts once');
    this.starting = this.startAll();
    return this.starting;
  }

  private async startAll(): Promise<void> {
    for (const part of this.parts) {
      // A close asked for during the start stops it here; close() then closes what was started.
      if (this.closing !== undefined) throw new Error(`closed while starting, before "${part.name}"`);
      try {
        this.logger.debug({ component: part.name }, 'starting');
        await part.start?.();
      } catch (e) {
        await this.closeStarted();
        throw e;
      }
      this.started.push(part);
    }
  }

  /**
   * Closes the started parts, last first: a start in progress stops at its
   * next part first. Rejects, once every part was tried, with the error of a
   * part that failed to close (an AggregateError for several). Idempotent.
   */
  close(): Promise<void> {
    this.closing ??= this.closeAll();
    return this.closing;
  }

  private async closeAll(): Promise<void> {
    await this.starting?.catch(() => undefined);
    const errors = await this.closeStarted();
    const [first] = errors;
    if (first !== undefined) throw errors.length === 1 ? first : new AggregateError(errors, `${errors.length} components failed to close`);
  }

  private async closeStarted(): Promise<unknown[]> {
    const errors: unknown[] = [];
    for (let part = this.started.pop(); part !== undefined; part = this.started.pop()) {
      try {
        this.logger.debug({ component: part.name }, 'closing');
        await part.close?.();
      } catch (e) {
        this.logger.error({ err: e, component: part.name }, `${part.name} failed to close; closing the rest`);
        errors.push(e);
      }
    }
    return errors;
  }
}
