import 'uplot/dist/uPlot.min.css';
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

export interface ChartSeries {
  label: string;
  color: string;
  /** Filled bars instead of a line. */
  bars?: boolean;
  /** Draw against the second y axis (the right one), in its unit. */
  right?: boolean;
}

interface Props {
  /** x: unix seconds; then one array per series (null: no value). */
  data: [number[], ...(number | null)[][]];
  series: ChartSeries[];
  /** What the chart shows, in words: screen readers read this instead of the canvas. */
  summary: string;
  height?: number;
  /** A sparkline: no axes, legend or cursor. */
  small?: boolean;
  /** Formats values of the right axis (left: plain numbers). */
  rightUnit?: (v: number) => string;
}

const bars = uPlot.paths.bars?.({ size: [0.8, 40] });

/** A colour of the page's theme (style.css), so the canvas follows light and dark mode too. */
const themeColor = (name: string) =>
  getComputedStyle(document.documentElement).getPropertyValue(name).trim() || undefined;

function options(p: Props, width: number): uPlot.Options {
  const small = p.small ?? false;
  const ink = themeColor('--ink');
  const line = themeColor('--line');
  const axis = { stroke: ink, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 } };
  return {
    width,
    height: p.height ?? (small ? 32 : 180),
    legend: { show: !small },
    // The legend shows the values under the cursor; without one (the pointer elsewhere, or a
    // touch screen) it shows the latest minute that has values, not "--".
    hooks: small
      ? {}
      : {
          ready: [showLatest],
          setData: [showLatest],
          setCursor: [(u) => (u.cursor.idx == null ? showLatest(u) : undefined)],
        },
    cursor: { show: !small },
    padding: small ? [2, 0, 2, 0] : [8, 8, 0, 0],
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
    axes: small
      ? [{ show: false }, { show: false }]
      : [
          { ...axis, values: (_u, ticks) => ticks.map(clock) },
          { ...axis, size: 44 },
          ...(p.series.some((s) => s.right)
            ? [{ ...axis, side: 1, scale: 'right', size: 56, grid: { show: false }, values: rightValues(p) }]
            : []),
        ],
    series: [
      {},
      ...p.series.map((s) => ({
        label: s.label,
        stroke: s.color,
        width: small ? 1.5 : 2,
        ...(s.right ? { scale: 'right' } : {}),
        ...(s.bars ? { fill: `${s.color}55`, paths: bars } : {}),
        points: { show: false },
      })),
    ],
  };
}

/** Point the legend at the last index where some series has a value. */
function showLatest(u: uPlot) {
  for (let i = u.data[0].length - 1; i >= 0; i--) {
    if (u.data.slice(1).some((values) => values[i] != null)) {
      u.setLegend({ idx: i });
      return;
    }
  }
}

const clock = (seconds: number) =>
  new Date(seconds * 1000).toLocaleTimeString('en-GB', { hour: '2-digit', minute: '2-digit' });

const rightValues = (p: Props) => (_u: uPlot, ticks: number[]) =>
  ticks.map((v) => (p.rightUnit ? p.rightUnit(v) : String(v)));

/**
 * A uPlot chart (canvas), sized to its container. The canvas says nothing to a screen reader, so
 * the figure carries `summary` as its accessible name.
 */
export function Chart(props: Props) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = props.series.map((s) => `${s.label}:${s.right ?? false}`).join();

  // Rebuilt only when the series change; new data goes in with setData below.
  useEffect(() => {
    const el = box.current!;
    plot.current = new uPlot(options(props, el.clientWidth || 300), props.data as uPlot.AlignedData, el);
    const resize = new ResizeObserver(() => {
      plot.current?.setSize({
        width: el.clientWidth || 300,
        height: props.height ?? (props.small ? 32 : 180),
      });
    });
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [shape, props.small]);

  useEffect(() => {
    plot.current?.setData(props.data as uPlot.AlignedData);
  }, [props.data]);

  return (
    <figure class={props.small ? 'chart small' : 'chart'} role="img" aria-label={props.summary}>
      <div ref={box} />
    </figure>
  );
}
