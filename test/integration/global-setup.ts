import type { TestProject } from 'vitest/node';
import { startClickHouse } from './support/clickhouse-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** http://127.0.0.1:<port> of the ClickHouse server shared by the integration tests. */
    clickhouseHttpUrl: string;
  }
}

/** One real ClickHouse server for the integration run; each test file uses its own database. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const ch = await startClickHouse();
  project.provide('clickhouseHttpUrl', `http://127.0.0.1:${ch.httpPort}`);
  return () => ch.dispose();
}
