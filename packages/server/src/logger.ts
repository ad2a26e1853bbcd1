import { pino, type Logger } from 'pino';

/**
 * The process logger. Redaction is a second line of defence: no code path
 * logs headers or keys, but if one ever did, these paths are blanked.
 */
export function createLogger(opts: { level: string; pretty: boolean }): Logger {
  return pino({
    level: opts.level,
    base: { service: 'trace-ingest' },
    redact: {
      paths: ['req.headers.authorization', 'req.headers["x-api-key"]', 'headers.authorization', 'headers["x-api-key"]', 'key', 'apiKey'],
      censor: '[redacted]',
    },
    ...(opts.pretty ? { transport: { target: 'pino-pretty' } } : {}),
  });
}
