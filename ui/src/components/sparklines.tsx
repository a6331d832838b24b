import type { QueueHistory } from '../api.js';
import { count, percent } from '../format.js';
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
          <Chart
            small
            data={[m.at, m.failureRate.map((r) => (r === null ? null : r * 100))]}
            series={[{ label: 'failure rate', color: '#b3261e' }]}
            summary={
              rate === undefined
                ? 'nothing finished in the last hour'
                : `${percent(rate)} failed in the last hour`
            }
          />
          <span aria-hidden="true">{rate === undefined ? '—' : percent(rate)}</span>
        </div>
      </td>
    </>
  );
}
