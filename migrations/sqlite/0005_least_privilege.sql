ALTER TABLE `api_keys` ADD `scopes` text DEFAULT 'ingest' NOT NULL;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `customers` text;--> statement-breakpoint
ALTER TABLE `budgets` ADD `webhook_secret_previous` text;--> statement-breakpoint
ALTER TABLE `budgets` ADD `webhook_secret_previous_until` integer;