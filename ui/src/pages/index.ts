import type { Page } from '../page.js';
import { GroupPage } from './group.js';
import { JobPage } from './job.js';
import { JobsPage } from './jobs.js';
import { Overview } from './overview.js';
import { QueuePage } from './queue.js';
import { SchedulePage } from './schedule.js';
import { SchedulesPage } from './schedules.js';
import { WorkersPage } from './workers.js';

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
