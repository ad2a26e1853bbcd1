CREATE TABLE "budget_events" (
	"id" text PRIMARY KEY NOT NULL,
	"budget_id" text NOT NULL,
	"org_id" text NOT NULL,
	"customer_id" text NOT NULL,
	"month" text NOT NULL,
	"threshold" integer NOT NULL,
	"spent_usd" text NOT NULL,
	"budget_usd" text NOT NULL,
	"created_at" bigint NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" bigint NOT NULL,
	"claimed_by" text,
	"claimed_until" bigint,
	"delivered_at" bigint,
	"last_error" text
);
--> statement-breakpoint
CREATE TABLE "budgets" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"customer_id" text DEFAULT '' NOT NULL,
	"monthly_usd" text NOT NULL,
	"alert_at" text NOT NULL,
	"webhook_url" text,
	"webhook_secret" text,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "budgets" ADD CONSTRAINT "budgets_org_id_orgs_id_fk" FOREIGN KEY ("org_id") REFERENCES "orgs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "budget_events_key_idx" ON "budget_events" USING btree ("budget_id","customer_id","month","threshold");--> statement-breakpoint
CREATE INDEX "budget_events_due_idx" ON "budget_events" USING btree ("delivered_at","next_attempt_at");--> statement-breakpoint
CREATE UNIQUE INDEX "budgets_scope_idx" ON "budgets" USING btree ("org_id","customer_id");