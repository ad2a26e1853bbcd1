/**
 * Dates typed by people (the CLI's --from/--to/--at, the console's pickers),
 * read one way everywhere. Date.parse rolls impossible days over
 * (2026-11-31 becomes 1 December), so a day must survive the round trip.
 */

const DAY = /^(\d{4})-(\d{2})-(\d{2})$/;

/** UTC midnight of a YYYY-MM-DD day, or undefined when it is not a calendar day. */
export function parseUtcDay(text: string): number | undefined {
  if (!DAY.test(text)) return undefined;
  const ms = Date.parse(`${text}T00:00:00Z`);
  return Number.isFinite(ms) && new Date(ms).toISOString().slice(0, 10) === text ? ms : undefined;
}

/** A YYYY-MM-DD day (UTC midnight) or an ISO timestamp whose date part is a calendar day, as epoch ms. */
export function parseDateOrTime(text: string): number | undefined {
  if (DAY.test(text)) return parseUtcDay(text);
  const datePart = /^(\d{4}-\d{2}-\d{2})T/.exec(text)?.[1];
  if (datePart !== undefined && parseUtcDay(datePart) === undefined) return undefined;
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? ms : undefined;
}
