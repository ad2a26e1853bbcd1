import { defineConfig } from 'vitest/config';

// The Docker smoke test, run by scripts/docker-ci.sh against its own dockerd: apart from `npm test`,
// which never builds the image. Same source conditions as the root config.
const conditions = ['@trace-ingest/source'];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: conditions } },
  test: {
    include: ['test/docker/**/*.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});
