import type { FunctionComponent } from 'preact';
import { JobPage } from './job.js';
import { Overview } from './overview.js';
import { QueuePage } from './queue.js';

export interface PageProps {
  params: Record<string, string>;
  query: URLSearchParams;
}

/**
 * Every page of the dashboard: its path in the URL fragment, its title, and whether the header
 * links to it. A new page is one entry here (the schedules page, once cron schedules exist: see
 * docs/dashboard.md).
 */
export interface Page {
  path: string;
  title: (params: Record<string, string>) => string;
  /** The header's link text, for pages reached from the header. */
  nav?: string;
  component: FunctionComponent<PageProps>;
}

export const PAGES: Page[] = [
  { path: '/', nav: 'Queues', title: () => 'Queues', component: Overview },
  { path: '/queues/:queue', title: (p) => `Queue ${p.queue}`, component: QueuePage },
  { path: '/jobs/:id', title: (p) => `Job ${p.id}`, component: JobPage },
];
