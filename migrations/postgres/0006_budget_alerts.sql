DROP INDEX "budget_events_key_idx";--> statement-breakpoint
DROP INDEX "budget_events_due_idx";--> statement-breakpoint
ALTER TABLE "budget_events" ADD COLUMN "kind" text DEFAULT 'threshold' NOT NULL;--> statement-breakpoint
ALTER TABLE "budget_events" ADD COLUMN "model_id" text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE "budget_events" ADD COLUMN "day" text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE "budget_events" ADD COLUMN "delivery" text DEFAULT 'pending' NOT NULL;--> statement-breakpoint
ALTER TABLE "budget_events" ADD COLUMN "detail" text DEFAULT '{}' NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "budget_events_key_idx" ON "budget_events" USING btree ("budget_id","kind","customer_id","model_id","month","day","threshold");--> statement-breakpoint
CREATE INDEX "budget_events_due_idx" ON "budget_events" USING btree ("delivery","next_attempt_at");--> statement-breakpoint
UPDATE "budget_events" SET "delivery" = 'none', "delivered_at" = NULL WHERE "delivered_at" IS NOT NULL AND "budget_id" NOT IN (SELECT "id" FROM "budgets" WHERE "webhook_url" IS NOT NULL);--> statement-breakpoint
UPDATE "budget_events" SET "delivery" = 'delivered', "attempts" = "attempts" + 1 WHERE "delivered_at" IS NOT NULL;