CREATE TABLE `audit_log` (
	`id` text PRIMARY KEY NOT NULL,
	`at` integer NOT NULL,
	`actor` text NOT NULL,
	`action` text NOT NULL,
	`org_id` text NOT NULL,
	`target` text DEFAULT '' NOT NULL,
	`detail` text DEFAULT '{}' NOT NULL
);
--> statement-breakpoint
CREATE INDEX `audit_log_at_idx` ON `audit_log` (`at`);--> statement-breakpoint
ALTER TABLE `orgs` ADD `retention_days` integer;--> statement-breakpoint
ALTER TABLE `orgs` ADD `text_days` integer;--> statement-breakpoint
ALTER TABLE `orgs` ADD `content_policy` text;