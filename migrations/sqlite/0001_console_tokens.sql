CREATE TABLE `console_tokens` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text DEFAULT '' NOT NULL,
	`prefix` text NOT NULL,
	`token_hash` text NOT NULL,
	`org_id` text,
	`created_at` integer NOT NULL,
	`revoked_at` integer,
	FOREIGN KEY (`org_id`) REFERENCES `orgs`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `console_tokens_token_hash_unique` ON `console_tokens` (`token_hash`);--> statement-breakpoint
CREATE INDEX `console_tokens_prefix_idx` ON `console_tokens` (`prefix`);