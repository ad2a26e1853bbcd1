ALTER TABLE "api_keys" ADD COLUMN "scopes" text DEFAULT 'ingest' NOT NULL;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "customers" text;--> statement-breakpoint
ALTER TABLE "budgets" ADD COLUMN "webhook_secret_previous" text;--> statement-breakpoint
ALTER TABLE "budgets" ADD COLUMN "webhook_secret_previous_until" bigint;