import type { FunctionComponent } from 'preact';
import { GroupPage } from './group.js';
import { JobPage } from './job.js';
import { JobsPage } from './jobs.js';
import { Overview } from './overview.js';
import { QueuePage } from './queue.js';
import { SchedulePage } from './schedule.js';
import { SchedulesPage } from './schedules.js';
import { WorkersPage } from './workers.js';

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

export const PAGES: Page[] = [
  { path: '/', nav: 'Queues', title: () => 'Queues', component: Overview },
  { path: '/jobs', nav: 'Jobs', title: () => 'Jobs across queues', component: JobsPage },
  { path: '/queues/:queue', title: (p) => `Queue ${p.queue}`, component: QueuePage },
  {
    path: '/queues/:queue/groups/:group',
    title: (p) => `Group ${p.group} of ${p.queue}`,
    component: GroupPage,
  },
  { path: '/jobs/:id', title: (p) => `Job ${p.id}`, component: JobPage },
  { path: '/schedules', nav: 'Schedules', title: () => 'Schedules', component: SchedulesPage },
  { path: '/schedules/:name', title: (p) => `Schedule ${p.name}`, component: SchedulePage },
  { path: '/workers', nav: 'Workers', title: () => 'Workers', component: WorkersPage },
];
