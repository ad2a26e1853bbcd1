import { loadConfig } from '@trace-ingest/shared/config';
import { TiError } from '@trace-ingest/shared/errors';
import { createLogger } from './logger.js';
import { IngestServer } from './server.js';

/**
 * The server's entry point: the only place that reads the environment.
 * SIGTERM/SIGINT start a drain; a second signal during it forces exit.
 */
export async function main(env: Record<string, string | undefined> = process.env): Promise<void> {
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
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal during drain: exiting now; unflushed rows stay in the write log');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutdown requested');
    server.shutdown().then(
      () => process.exit(0),
      (e: unknown) => {
        logger.error({ err: e }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  try {
    await server.start();
  } catch (e) {
    const msg = e instanceof TiError ? e.message : e instanceof Error ? e.message : String(e);
    logger.fatal({ err: e }, `could not start: ${msg}`);
    await server.shutdown().catch(() => undefined);
    process.exit(1);
  }
}
