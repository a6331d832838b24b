import type { QueueHistory } from '../api.js';
import { count, percent, plural } from '../format.js';
import { perMinute, sum, useQueueHistory } from '../history.js';
import { Chart } from './chart.js';

/** A queue's last hour in two table cells: completions and failure rate, each a sparkline and a figure. */
export function Sparklines({ queue }: { queue: string }) {
  const history = useQueueHistory(queue);
  if (!history.data)
    return (
      <td colSpan={2} class="muted">
        {history.error ? 'no history' : '…'}
      </td>
    );
  return <HourCells history={history.data} />;
}

function HourCells({ history }: { history: QueueHistory }) {
  const m = perMinute(history, 60);
  const completed = sum(m.completed);
  const dead = sum(m.dead);
  const attempts = sum(m.attemptsFailed);
  const rate = completed + dead === 0 ? undefined : dead / (completed + dead);
  return (
    <>
      <td>
        <div class="spark">
          <Chart
            small
            data={[m.at, m.completed]}
            series={[{ label: 'completed', color: '#2b7a3d' }]}
            summary={`${count(completed)} completed in the last hour`}
          />
          <span aria-hidden="true">{count(completed)}</span>
        </div>
      </td>
      <td>
        <div class="spark">
          {/* Bars, not a line: a failure in one minute of an otherwise quiet hour is one bar, where a
              line between minutes with no value drew nothing. */}
          <Chart
            small
            data={[m.at, m.attemptsFailed]}
            series={[{ label: 'attempts failed', color: '#b3261e', bars: true }]}
            summary={
              `${plural(attempts, 'attempt')} failed in the last hour` +
              (rate === undefined
                ? ', nothing finished'
                : `; ${percent(rate)} of the jobs that finished died`)
            }
          />
          <span aria-hidden="true">{count(attempts)}</span>
        </div>
      </td>
    </>
  );
}
