CREATE TABLE "audit_log" (
	"id" text PRIMARY KEY NOT NULL,
	"at" bigint NOT NULL,
	"actor" text NOT NULL,
	"action" text NOT NULL,
	"org_id" text NOT NULL,
	"target" text DEFAULT '' NOT NULL,
	"detail" text DEFAULT '{}' NOT NULL
);
--> statement-breakpoint
ALTER TABLE "orgs" ADD COLUMN "retention_days" integer;--> statement-breakpoint
ALTER TABLE "orgs" ADD COLUMN "text_days" integer;--> statement-breakpoint
ALTER TABLE "orgs" ADD COLUMN "content_policy" text;--> statement-breakpoint
CREATE INDEX "audit_log_at_idx" ON "audit_log" USING btree ("at");