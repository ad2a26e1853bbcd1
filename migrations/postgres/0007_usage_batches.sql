CREATE TABLE "usage_batches" (
	"org_id" text NOT NULL,
	"batch_id" text NOT NULL,
	"spans" bigint NOT NULL,
	"add_id" text NOT NULL,
	"created_at" bigint NOT NULL,
	CONSTRAINT "usage_batches_org_id_batch_id_pk" PRIMARY KEY("org_id","batch_id")
);
--> statement-breakpoint
CREATE INDEX "usage_batches_add_idx" ON "usage_batches" USING btree ("add_id");--> statement-breakpoint
CREATE INDEX "usage_batches_created_idx" ON "usage_batches" USING btree ("created_at");