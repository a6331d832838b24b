import type { FunctionComponent } from 'preact';

export interface PageProps {
  params: Record<string, string>;
  query: URLSearchParams;
}

/**
 * Every page of the dashboard: its path in the URL fragment, its title, and whether the header
 * links to it. A new page is one entry here (see docs/dashboard.md, "Adding a page").
 */
export interface Page {
  path: string;
  title: (params: Record<string, string>) => string;
  /** The header's link text, for pages reached from the header. */
  nav?: string;
  component: FunctionComponent<PageProps>;
}
