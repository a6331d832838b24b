import { useEffect, useState } from 'preact/hooks';
import { type Job, must } from '../api.js';
import { ErrorLine, Loading, Pager, Scroll, StateBadge, usePager } from '../components/bits.js';
import { BulkBar, type ListMatch, SelectAllCell, SelectCell } from '../components/bulk-actions.js';
import { RefreshState, useHeldList } from '../components/held-list.js';
import { clock, count, plural } from '../format.js';
import type { PageProps } from '../page.js';
import { href, setQuery } from '../router.js';
import { useSession } from '../session.js';

type Show = 'dead' | 'failing' | 'key';
const WITHIN: Record<string, { label: string; ms?: number }> = {
  hour: { label: 'the last hour', ms: 3_600_000 },
  day: { label: 'the last 24 hours', ms: 86_400_000 },
  all: { label: 'all kept' },
};
const PAGE = 25;

interface Filters {
  show: Show;
  within: string;
  queue?: string;
  group?: string;
  error?: string;
  key?: string;
}

/**
 * Jobs across queues (GET /v1/jobs): what is failing (live jobs whose last attempt failed) or dead,
 * newest failure first, filtered by time, queue, group and error text; or the jobs a unique or
 * idempotency key names. The filters live in the URL. The list refreshes on its own, and holds
 * still while the operator points at it, works in it, selects text or has jobs selected; admins act
 * on a selection (redrive, cancel, delete) with a result per job.
 */
export function JobsPage({ query }: PageProps) {
  const show = (['dead', 'failing', 'key'] as const).find((s) => s === query.get('show')) ?? 'dead';
  const within = query.get('within') ?? '';
  const filters: Filters = {
    show,
    within: within in WITHIN ? within : 'hour',
    ...(query.get('queue') ? { queue: query.get('queue')! } : {}),
    ...(query.get('group') ? { group: query.get('group')! } : {}),
    ...(query.get('error') ? { error: query.get('error')! } : {}),
    ...(query.get('key') ? { key: query.get('key')! } : {}),
  };
  return (
    <>
      <h1 tabIndex={-1}>Jobs across queues</h1>
      <FilterForm filters={filters} />
      <KeyForm filters={filters} />
      <JobList key={JSON.stringify(filters)} filters={filters} />
    </>
  );
}

function FilterForm({ filters }: { filters: Filters }) {
  const [text, setText] = useState({ queue: '', group: '', error: '' });
  useEffect(
    () => setText({ queue: filters.queue ?? '', group: filters.group ?? '', error: filters.error ?? '' }),
    [filters.queue, filters.group, filters.error],
  );
  const field = (name: keyof typeof text, label: string, placeholder: string) => (
    <label>
      {label}{' '}
      <input
        type="text"
        value={text[name]}
        placeholder={placeholder}
        spellcheck={false}
        autocomplete="off"
        maxLength={name === 'error' ? 200 : 128}
        onInput={(e) => setText({ ...text, [name]: e.currentTarget.value })}
      />
    </label>
  );
  return (
    <form
      class="filters"
      aria-label="Which jobs"
      onSubmit={(e) => {
        e.preventDefault();
        setQuery({
          show: filters.show === 'key' ? 'dead' : filters.show,
          key: undefined,
          queue: text.queue.trim() || undefined,
          group: text.group.trim() || undefined,
          error: text.error.trim() || undefined,
        });
      }}
    >
      <label>
        Show{' '}
        <select
          value={filters.show === 'key' ? '' : filters.show}
          onChange={(e) => setQuery({ show: e.currentTarget.value, key: undefined })}
        >
          {filters.show === 'key' && <option value="">(found by key)</option>}
          <option value="dead">dead jobs</option>
          <option value="failing">failing jobs (retrying)</option>
        </select>
      </label>
      <label>
        Failed within{' '}
        <select value={filters.within} onChange={(e) => setQuery({ within: e.currentTarget.value })}>
          {Object.entries(WITHIN).map(([value, w]) => (
            <option key={value} value={value}>
              {w.label}
            </option>
          ))}
        </select>
      </label>
      {field('queue', 'Queue', 'every queue')}
      {field('group', 'Group', 'every group')}
      {field('error', 'Error text', 'any error')}
      <button type="submit">Apply</button>
    </form>
  );
}

function KeyForm({ filters }: { filters: Filters }) {
  const [key, setKey] = useState(filters.key ?? '');
  useEffect(() => setKey(filters.key ?? ''), [filters.key]);
  return (
    <form
      class="filters"
      aria-label="Find by key"
      onSubmit={(e) => {
        e.preventDefault();
        if (key.trim()) setQuery({ show: 'key', key: key.trim() });
      }}
    >
      <label>
        Unique or idempotency key{' '}
        <input
          type="search"
          value={key}
          spellcheck={false}
          autocomplete="off"
          maxLength={255}
          onInput={(e) => setKey(e.currentTarget.value)}
        />
      </label>
      <button type="submit" disabled={!key.trim()}>
        Find by key
      </button>
    </form>
  );
}

function JobList({ filters }: { filters: Filters }) {
  const { api, canAct, who } = useSession();
  const pager = usePager();
  const { list, region, selection, held } = useHeldList(
    async (signal) => {
      if (filters.show === 'key') {
        // A key is either kind: both are asked, and a job named by both is listed once.
        const [unique, idem] = await Promise.all(
          (['unique_key', 'idempotency_key'] as const).map((k) =>
            must(
              api.GET('/v1/jobs', {
                params: { query: { [k]: filters.key!, ...(filters.queue ? { queue: filters.queue } : {}) } },
                signal,
              }),
            ),
          ),
        );
        const byId = new Map([...unique!.jobs, ...idem!.jobs].map((j) => [j.id, j]));
        return { jobs: [...byId.values()], next_cursor: null };
      }
      return must(
        api.GET('/v1/jobs', {
          params: {
            query: {
              state: filters.show,
              limit: PAGE,
              ...since(),
              ...narrowing,
              ...(pager.cursor ? { cursor: pager.cursor } : {}),
            },
          },
          signal,
        }),
      );
    },
    [api, pager.cursor],
  );
  const jobs = list.data?.jobs;
  const [every, setEvery] = useState<ListMatch | undefined>();
  const [countError, setCountError] = useState<Error | undefined>();
  const allOnPage = jobs !== undefined && jobs.length > 0 && jobs.every((j) => selection.has(j.id));
  // "Every job of the list" lasts while the page stays ticked (an action clears the selection).
  useEffect(() => {
    if (!allOnPage) setEvery(undefined);
  }, [allOnPage]);
  const since = () => {
    const ms = WITHIN[filters.within]?.ms;
    return ms ? { since: new Date(Date.now() - ms).toISOString() } : {};
  };
  const narrowing = {
    ...(filters.queue ? { queue: filters.queue } : {}),
    ...(filters.group ? { group: filters.group } : {}),
    ...(filters.error ? { error: filters.error } : {}),
  };
  /** Counts the list (every page) and selects it whole, as of the count. */
  const selectEvery = async () => {
    if (filters.show === 'key') return;
    const bounds = since();
    setCountError(undefined);
    const page = await must(
      api.GET('/v1/jobs', {
        params: { query: { state: filters.show, limit: 1, count: true, ...bounds, ...narrowing } },
      }),
    ).catch((err: Error) => setCountError(err));
    if (!page) return;
    setEvery({
      match: { state: filters.show, ...bounds, ...narrowing, until: page.counted_at! },
      total: page.total ?? 0,
      capped: page.total_capped ?? false,
    });
  };
  const what =
    filters.show === 'key'
      ? `jobs named by key ${filters.key}`
      : `${filters.show} jobs${filters.queue ? ` of ${filters.queue}` : ''}${filters.group ? ` in group ${filters.group}` : ''}`;
  const when = (j: Job) =>
    filters.show === 'dead' || j.finished_at ? j.finished_at : (j.last_error?.at ?? null);
  return (
    <section aria-labelledby="list-title">
      <h2 id="list-title">
        {filters.show === 'key'
          ? `Named by key “${filters.key}”`
          : filters.show === 'dead'
            ? 'Dead jobs'
            : 'Failing jobs'}
        {filters.show !== 'key' && `, failed within ${WITHIN[filters.within]!.label}`}
      </h2>
      <RefreshState held={held}>
        {who.queue_limited && ' This key sees only the queues it may use.'}
      </RefreshState>
      <button type="button" class="refresh" onClick={list.reload}>
        Refresh now
      </button>
      <ErrorLine error={list.error} />
      {canAct && <BulkBar selection={selection} every={every} onDone={list.reload} />}
      <ErrorLine error={countError} />
      {canAct && allOnPage && filters.show !== 'key' && (list.data?.next_cursor || every) && (
        <p class="select-every">
          {every ? (
            <>
              {every.capped ? 'The newest ' : 'All '}
              {plural(every.total, `${filters.show} job`)} of this list are selected
              {every.capped ? ' (more match: an action takes these, and can be repeated)' : ''}, as counted at{' '}
              {clock(every.match.until)}.{' '}
              <button type="button" class="link" onClick={selection.clear}>
                Clear the selection
              </button>
            </>
          ) : (
            <>
              The {count(jobs!.length)} jobs on this page are selected.{' '}
              <button type="button" class="link" onClick={selectEvery}>
                Select every job of this list
              </button>
            </>
          )}
        </p>
      )}
      <div ref={region}>
        {!jobs ? (
          list.error ? null : (
            <Loading />
          )
        ) : jobs.length === 0 ? (
          <p>No {what}.</p>
        ) : (
          <Scroll label={what}>
            <table class="jobs across">
              <caption class="visually-hidden">{what}</caption>
              <thead>
                <tr>
                  {canAct && <SelectAllCell selection={selection} jobs={jobs} />}
                  <th scope="col">Job</th>
                  <th scope="col">Queue</th>
                  <th scope="col">State</th>
                  <th scope="col" class="num">
                    Attempts
                  </th>
                  <th scope="col">Failed</th>
                  {filters.show === 'failing' && <th scope="col">Next retry</th>}
                  <th scope="col">Last error</th>
                </tr>
              </thead>
              <tbody>
                {jobs.map((job) => (
                  <tr key={job.id}>
                    {canAct && <SelectCell selection={selection} job={job} />}
                    <th scope="row">
                      <a href={href('/jobs', job.id)}>{job.id}</a>
                    </th>
                    <td class="group">
                      <a href={href('/queues', job.queue)}>{job.queue}</a>
                      {job.group !== null && <span class="muted relative">{job.group}</span>}
                    </td>
                    <td>
                      <StateBadge state={job.state} />
                    </td>
                    <td class="num">
                      {job.attempts} of {job.max_attempts}
                    </td>
                    <td>{clock(when(job))}</td>
                    {filters.show === 'failing' && <td>{nextRetry(job)}</td>}
                    <td class="message">{job.last_error?.message ?? ''}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </Scroll>
        )}
      </div>
      <Pager pager={pager} nextCursor={list.data?.next_cursor} what={what} />
    </section>
  );
}

/** When a failing job runs again: its retry's time while it waits, else what it is doing now. */
function nextRetry(job: Job): string {
  if (job.state === 'scheduled') return clock(job.run_at);
  if (job.state === 'claimed') return 'running now';
  return job.state === 'ready' ? 'ready now' : '';
}
