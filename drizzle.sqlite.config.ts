import { defineConfig } from 'drizzle-kit';

// `npx drizzle-kit generate --config drizzle.sqlite.config.ts` writes the next
// SQLite migration into migrations/sqlite from the schema.
export default defineConfig({
  dialect: 'sqlite',
  schema: './packages/store/src/schema/sqlite.ts',
  out: './migrations/sqlite',
});
