CREATE TABLE `usage_batches` (
	`org_id` text NOT NULL,
	`batch_id` text NOT NULL,
	`spans` integer NOT NULL,
	`add_id` text NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`org_id`, `batch_id`)
);
--> statement-breakpoint
CREATE INDEX `usage_batches_add_idx` ON `usage_batches` (`add_id`);--> statement-breakpoint
CREATE INDEX `usage_batches_created_idx` ON `usage_batches` (`created_at`);