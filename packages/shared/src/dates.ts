/**
 * UTC days, read and written one way everywhere: as epoch ms and as
 * YYYY-MM-DD text. Date.parse rolls impossible days over (2026-11-31
 * becomes 1 December), so a day typed by people must survive the round trip.
 */

const DAY = /^(\d{4})-(\d{2})-(\d{2})$/;

export const DAY_MS = 86_400_000;

/** UTC midnight of a YYYY-MM-DD day, or undefined when it is not a calendar day. */
export function parseUtcDay(text: string): number | undefined {
  if (!DAY.test(text)) return undefined;
  const ms = Date.parse(`${text}T00:00:00Z`);
  return Number.isFinite(ms) && utcDay(ms) === text ? ms : undefined;
}

/** A YYYY-MM-DD day (UTC midnight) or an ISO timestamp whose date part is a calendar day, as epoch ms. */
export function parseDateOrTime(text: string): number | undefined {
  if (DAY.test(text)) return parseUtcDay(text);
  const datePart = /^(\d{4}-\d{2}-\d{2})T/.exec(text)?.[1];
  if (datePart !== undefined && parseUtcDay(datePart) === undefined) return undefined;
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? ms : undefined;
}

// The spans of one batch nearly always fall on one day: the last day's text is kept rather than formatted per span.
let lastDay = Number.NaN;
let lastDayText = '';

/** The UTC day of an epoch-ms instant as YYYY-MM-DD. */
export function utcDay(ms: number): string {
  const day = Math.floor(ms / DAY_MS);
  if (day !== lastDay) {
    lastDayText = new Date(day * DAY_MS).toISOString().slice(0, 10);
    lastDay = day;
  }
  return lastDayText;
}

/** UTC midnight at or before an instant. */
export const floorDay = (ms: number): number => Math.floor(ms / DAY_MS) * DAY_MS;

/** UTC midnight at or after an instant. */
export const ceilDay = (ms: number): number => Math.ceil(ms / DAY_MS) * DAY_MS;

/** UTC midnight of a YYYY-MM-DD day as epoch ms (NaN when the text is no date; unchecked: for days the code made itself). */
export const dayMs = (day: string): number => Date.parse(`${day}T00:00:00Z`);

/** Whether a text has the YYYY-MM-DD form of a day (a day beyond the years 0000-9999 does not). */
export const isDayText = (text: string): boolean => DAY.test(text);

/** A day's text, checked to have the YYYY-MM-DD form (a day the code made itself, checked all the same before it reaches SQL). */
export function checkedDay(day: string): string {
  if (!DAY.test(day)) throw new Error(`not a day: ${JSON.stringify(day)}`);
  return day;
}

/** The day `n` days after `day` (before, when negative). */
export function addDays(day: string, n: number): string {
  return utcDay(dayMs(checkedDay(day)) + n * DAY_MS);
}

/** How many days there are from `from` up to `to` (exclusive). */
export function daysBetween(from: string, to: string): number {
  const start = dayMs(checkedDay(from));
  return Math.max(0, Math.round((dayMs(checkedDay(to)) - start) / DAY_MS));
}

/** The days from `from` up to `to` (exclusive), in order. */
export function eachDay(from: string, to: string): string[] {
  const [start, end] = [dayMs(checkedDay(from)), dayMs(checkedDay(to))];
  const out: string[] = [];
  for (let ms = start; ms < end; ms += DAY_MS) out.push(utcDay(ms));
  return out;
}
