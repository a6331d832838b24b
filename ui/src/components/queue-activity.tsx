import type { QueueHistory } from '../api.js';
import { count, duration } from '../format.js';
import { max, perMinute, sum, useQueueHistory } from '../history.js';
import { ErrorLine, Loading } from './bits.js';
import { Chart } from './chart.js';

/** A queue's last hour (GET /v1/queues/{queue}/history, re-read once a minute), as two charts. */
export function Activity({ queue }: { queue: string }) {
  const history = useQueueHistory(queue);
  return (
    <section aria-labelledby="activity-title">
      <h2 id="activity-title">The last hour</h2>
      <ErrorLine error={history.error} />
      {history.data ? <HourCharts history={history.data} /> : history.error ? null : <Loading />}
    </section>
  );
}

function HourCharts({ history }: { history: QueueHistory }) {
  const m = perMinute(history, 60);
  return (
    <div class="charts">
      <div>
        <h3>Jobs per minute</h3>
        <Chart
          data={[m.at, m.enqueued, m.completed, m.attemptsFailed, m.dead]}
          series={[
            { label: 'enqueued', color: '#1f4e79' },
            { label: 'completed', color: '#2b7a3d' },
            { label: 'attempts failed', color: '#c26a00', bars: true },
            { label: 'dead', color: '#b3261e', bars: true },
          ]}
          summary={
            `In the last hour: ${count(sum(m.enqueued))} enqueued, ${count(sum(m.completed))} completed, ` +
            `${count(sum(m.attemptsFailed))} attempts failed, ${count(sum(m.dead))} dead.`
          }
        />
      </div>
      <div>
        <h3>Queue lag and ready jobs</h3>
        <Chart
          data={[m.at, m.ready, m.lagSeconds]}
          series={[
            { label: 'ready', color: '#1f4e79' },
            { label: 'oldest ready (lag)', color: '#a15c00', right: true },
          ]}
          rightUnit={secondsTick}
          summary={
            `In the last hour: at most ${count(max(m.ready))} jobs ready; the oldest ready job waited at most ` +
            `${duration(max(m.lagSeconds) * 1000)}.`
          }
        />
      </div>
    </div>
  );
}

/** An axis tick in seconds, exact enough to tell ticks apart: 45 s, 1.5 min, 2 h. */
const secondsTick = (v: number) =>
  v < 60 ? `${+v.toFixed(1)} s` : v < 3600 ? `${+(v / 60).toFixed(1)} min` : `${+(v / 3600).toFixed(1)} h`;
