CREATE TABLE "console_tokens" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text DEFAULT '' NOT NULL,
	"prefix" text NOT NULL,
	"token_hash" text NOT NULL,
	"org_id" text,
	"created_at" bigint NOT NULL,
	"revoked_at" bigint,
	CONSTRAINT "console_tokens_token_hash_unique" UNIQUE("token_hash")
);
--> statement-breakpoint
ALTER TABLE "console_tokens" ADD CONSTRAINT "console_tokens_org_id_orgs_id_fk" FOREIGN KEY ("org_id") REFERENCES "orgs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "console_tokens_prefix_idx" ON "console_tokens" USING btree ("prefix");