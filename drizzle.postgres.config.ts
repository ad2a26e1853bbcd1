import { defineConfig } from 'drizzle-kit';

// `npx drizzle-kit generate --config drizzle.postgres.config.ts` writes the next
// PostgreSQL migration into migrations/postgres from the schema.
//
// The key store runs in whichever schema DATABASE_URL names (`?schema=`), so a
// migration must not name one: drizzle-kit qualifies foreign-key targets with
// "public"., which has to be removed from the generated SQL before committing
// (test/integration/control-store-postgres.test.ts fails on any schema-qualified name).
export default defineConfig({
  dialect: 'postgresql',
  schema: './packages/store/src/schema/postgres.ts',
  out: './migrations/postgres',
});
