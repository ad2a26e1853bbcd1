CREATE TABLE `price_adoptions` (
	`id` text PRIMARY KEY NOT NULL,
	`provider` text NOT NULL,
	`model` text NOT NULL,
	`valid_from` text NOT NULL,
	`source` text NOT NULL,
	`prices` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `price_adoptions_key_idx` ON `price_adoptions` (`provider`,`model`);--> statement-breakpoint
CREATE TABLE `price_catalogs` (
	`id` text PRIMARY KEY NOT NULL,
	`source` text NOT NULL,
	`date` text NOT NULL,
	`sha256` text NOT NULL,
	`data` text NOT NULL,
	`imported_at` integer NOT NULL,
	`imported_by` text DEFAULT '' NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `price_catalogs_sha256_unique` ON `price_catalogs` (`sha256`);