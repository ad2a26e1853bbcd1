import { loadConfig } from '@trace-ingest/shared/config';
import { PRIVATE_UMASK } from '@trace-ingest/shared/data-dir';
import { TiError } from '@trace-ingest/shared/errors';
import { onShutdownSignals, SIGNAL_REPEAT_MS } from '@trace-ingest/shared/signals';
import { createLogger } from './logger.js';
import { IngestServer } from './server.js';

/**
 * The server's entry point: the only place that reads the environment.
 * SIGTERM/SIGINT start a drain; a second signal event during it forces exit.
 * The copies of one event (the process group's and a parent's forwarded one)
 * start one drain.
 */
export async function main(env: Record<string, string | undefined> = process.env): Promise<void> {
  // Every file the server makes under DATA_DIR (SQLite, DuckDB and their logs, wal/, dead-letter/, tmp/) is 0600, every folder 0700.
  process.umask(PRIVATE_UMASK);
  let config;
  try {
    config = loadConfig(env);
  } catch (e) {
    process.stderr.write(`trace-ingest: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 78;
    return;
  }
  const logger = createLogger({ level: config.LOG_LEVEL, pretty: config.LOG_PRETTY });
  const server = new IngestServer(config, logger);
  const boundMs = config.DRAIN_GRACE_MS + config.DRAIN_TIMEOUT_MS + 30_000;
  let stopping = false;
  const stop = (skipGrace: boolean) => {
    if (stopping) return;
    stopping = true;
    // Once the listeners are closed, what is left of a drain waits on unref'd timers (the flusher's
    // backoff during a store outage): without a ref'd handle Node would exit halfway through it,
    // before the quota counts owed are written and the stores closed. The bound below ends a
    // shutdown that hangs past its own limits.
    const keepAlive = setInterval(() => undefined, 60_000);
    const bound = setTimeout(() => {
      logger.error({ boundMs }, 'shutdown did not finish within its bound; exiting');
      process.exit(1);
    }, boundMs);
    server.shutdown({ skipGrace }).then(
      () => {
        clearInterval(keepAlive);
        clearTimeout(bound);
        process.exit(0);
      },
      (e: unknown) => {
        logger.error({ err: e }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  // Run by `trace-ingest serve` (an IPC channel to it): when that parent dies, even by SIGKILL, the
  // channel closes and this process stops too, so a supervisor's restart finds the port and DATA_DIR free.
  if (process.channel !== undefined) {
    process.channel.unref();
    process.once('disconnect', () => {
      logger.warn('the parent process (trace-ingest serve) is gone: stopping without the drain grace');
      stop(true);
    });
  }
  onShutdownSignals({
    first: (signal) => {
      logger.info({ signal }, `shutdown requested: draining; send the signal again (after ${SIGNAL_REPEAT_MS} ms) to exit at once`);
      stop(false);
    },
    copy: (signal) => logger.debug({ signal }, 'the same signal again (process group and forwarded): one drain'),
    again: (signal) => {
      logger.warn({ signal }, 'second signal during drain: exiting now; unflushed rows stay in the write log');
      process.exit(1);
    },
  });
  try {
    await server.start();
  } catch (e) {
    // A signal during the start stopped it at its next part: that shutdown closes what was started and exits.
    if (stopping) return;
    // A refusal (TiError: configuration, DATA_DIR) is one line that says what to fix; anything else keeps its stack.
    if (e instanceof TiError) logger.fatal({ code: e.code }, `could not start: ${e.message}`);
    else logger.fatal({ err: e }, `could not start: ${e instanceof Error ? e.message : String(e)}`);
    await server.shutdown().catch(() => undefined);
    process.exit(1);
  }
}
