/**
 * The unpriced rule, said once for every place that counts such spans: a
 * span is unpriced when it names a model and pricing found no price for it
 * (a span of no model, such as a tool call, costs nothing by nature).
 */

/** How a SQL dialect spells the rule's two tests on a `spans` row. */
export interface UnpricedSpelling {
  /** The boolean column is false. */
  isFalse(column: string): string;
  /** The text column is not empty. */
  notEmpty(column: string): string;
}

/** The rule as a SQL condition on a `spans` row. */
export function unpricedSql(d: UnpricedSpelling): string {
  return `${d.isFalse('priced')} AND ${d.notEmpty('model_id')}`;
}

/** The rule on a span as TypeScript holds it: whether it was priced, and its model ('' for none). */
export function isUnpriced(priced: boolean, model: string): boolean {
  return !priced && model !== '';
}
