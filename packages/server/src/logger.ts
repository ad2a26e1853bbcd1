import { createRequire } from 'node:module';
import { pino, type Logger } from 'pino';

/**
 * The process logger. Redaction is a second line of defence: no code path
 * logs headers or keys, but if one ever did, these paths are blanked.
 */
export function createLogger(opts: { level: string; pretty: boolean; destination?: NodeJS.WritableStream }, hasPretty = prettyAvailable): Logger {
  // pino-pretty is a development tool, absent from the production image: there LOG_PRETTY=true
  // falls back to JSON lines with one warning instead of crashing the process.
  const pretty = opts.pretty && hasPretty();
  const logger = pino(
    {
      level: opts.level,
      base: { service: 'trace-ingest' },
      redact: {
        paths: ['req.headers.authorization', 'req.headers["x-api-key"]', 'headers.authorization', 'headers["x-api-key"]', 'key', 'apiKey'],
        censor: '[redacted]',
      },
      ...(pretty ? { transport: { target: 'pino-pretty' } } : {}),
    },
    ...(opts.destination === undefined || pretty ? [] : [opts.destination]),
  );
  if (opts.pretty && !pretty) logger.warn('LOG_PRETTY=true, but pino-pretty is not installed here (a production install): logging JSON lines');
  return logger;
}

function prettyAvailable(): boolean {
  try {
    createRequire(import.meta.url).resolve('pino-pretty');
    return true;
  } catch {
    return false;
  }
}
