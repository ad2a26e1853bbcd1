/** What the router hands a page, and what the page gives back. */
export interface PageParams {
  org: string;
  from: string;
  to: string;
  /** The rest of the route, e.g. a trace id. */
  arg?: string;
}

export interface Rendered {
  node: HTMLElement;
  /** Runs once the node is in the document (charts need a sized canvas); returns a cleanup. */
  mounted?: () => () => void;
}

export type Page = (p: PageParams) => Promise<Rendered>;
