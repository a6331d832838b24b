import type { JobGraph as Graph } from '../api.js';
import { href } from '../router.js';

/** Nodes per row: a layer wider than this wraps onto more rows (a fan-out stays on screen). */
const ROW = 6;
const W = 132;
const H = 40;
const GAP_X = 16;
/** Between wrapped rows of one layer, and (larger, room for the edges' curves) between layers. */
const GAP_ROW = 12;
const GAP_LAYER = 40;

/** Ids are decimal strings of bigints: shorter first, then as text, is numeric order. */
const byId = (a: string, b: string) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);

interface Placed {
  id: string;
  queue: string;
  state: string | null;
  x: number;
  y: number;
}

/**
 * Each job's layer is its longest path from a job without parents among those drawn, so every
 * edge points down; a layer is laid out in id order, in rows of ROW.
 */
export function layout(graph: Graph): { nodes: Map<string, Placed>; width: number; height: number } {
  const parents = new Map<string, string[]>();
  for (const e of graph.edges) parents.set(e.child, [...(parents.get(e.child) ?? []), e.parent]);
  const layer = new Map<string, number>();
  const depth = (id: string, seen: Set<string>): number => {
    const known = layer.get(id);
    if (known !== undefined) return known;
    // Dependencies have no cycle (enqueue refuses one); the guard keeps a bad answer from looping.
    if (seen.has(id)) return 0;
    seen.add(id);
    const d = Math.max(-1, ...(parents.get(id) ?? []).map((p) => depth(p, seen))) + 1;
    layer.set(id, d);
    return d;
  };
  for (const j of graph.jobs) depth(j.id, new Set());
  const layers: (typeof graph.jobs)[] = [];
  for (const j of graph.jobs) {
    const d = layer.get(j.id)!;
    layers[d] = [...(layers[d] ?? []), j];
  }
  const columns = Math.min(ROW, Math.max(...layers.map((l) => l?.length ?? 0)));
  const width = columns * (W + GAP_X) - GAP_X;
  const nodes = new Map<string, Placed>();
  let y = 0;
  for (const jobs of layers) {
    if (!jobs) continue;
    jobs.sort((a, b) => byId(a.id, b.id));
    for (let start = 0; start < jobs.length; start += ROW) {
      const row = jobs.slice(start, start + ROW);
      const left = (width - (row.length * (W + GAP_X) - GAP_X)) / 2;
      row.forEach((j, i) => {
        nodes.set(j.id, { ...j, x: left + i * (W + GAP_X), y });
      });
      y += H + GAP_ROW;
    }
    y += GAP_LAYER - GAP_ROW;
  }
  return { nodes, width, height: y - GAP_LAYER };
}

/**
 * A drawing of a job's workflow graph (GET /v1/jobs/{id}/graph): each job a box in its state's
 * colour, linked to its page, parents above children. Drawn as SVG by the page itself (the
 * dashboard loads nothing from elsewhere); the lists below it stay the accessible reading.
 */
export function JobGraph({ graph, current }: { graph: Graph; current: string }) {
  if (graph.jobs.length < 2) return null;
  const { nodes, width: boxes, height } = layout(graph);
  const width = boxes + BOW;
  const pad = 4;
  return (
    <figure class="job-graph">
      <div class="graph-scroll">
        {/* Not role="img": the boxes are links, each reachable and named. */}
        <svg
          aria-labelledby="graph-title"
          width={width + 2 * pad}
          height={height + 2 * pad}
          viewBox={`${-pad} ${-pad} ${width + 2 * pad} ${height + 2 * pad}`}
        >
          <title id="graph-title">Workflow graph of job {current}</title>
          <defs>
            <marker
              id="graph-arrow"
              viewBox="0 0 8 8"
              refX="8"
              refY="4"
              markerWidth="7"
              markerHeight="7"
              orient="auto"
            >
              <path d="M0,0 L8,4 L0,8 z" class="graph-arrowhead" />
            </marker>
          </defs>
          {graph.edges.map((e) => {
            const p = nodes.get(e.parent);
            const c = nodes.get(e.child);
            if (!p || !c) return null;
            return (
              <path
                key={`${e.parent}>${e.child}`}
                class="graph-edge"
                d={edgePath(p, c)}
                marker-end="url(#graph-arrow)"
              />
            );
          })}
          {[...nodes.values()].map((n) => (
            <a
              key={n.id}
              href={href('/jobs', n.id)}
              aria-label={`Job ${n.id}, ${n.queue}, ${n.state ?? 'pruned'}`}
              data-job={n.id}
            >
              <rect
                x={n.x}
                y={n.y}
                width={W}
                height={H}
                rx={6}
                class={`graph-node state-${n.state ?? 'pruned'}${n.id === current ? ' current' : ''}`}
              />
              <text x={n.x + 8} y={n.y + 16} class="graph-id">
                Job {n.id}
              </text>
              <text x={n.x + 8} y={n.y + 32} class="graph-state">
                {clip(`${n.state ?? 'pruned'} · ${n.queue}`)}
              </text>
            </a>
          ))}
        </svg>
      </div>
      <figcaption id="graph-caption">
        Workflow graph: {graph.jobs.length} jobs, {graph.edges.length} dependencies
        {graph.truncated ? `; it holds more, the ${graph.jobs.length} nearest to this job are drawn` : ''}.
      </figcaption>
    </figure>
  );
}

/**
 * From the bottom of a parent to the top of its child; an edge that skips a row of boxes would run
 * behind them, so it leaves the parent's right side and reaches the child's, bowed out to the right.
 */
function edgePath(p: Placed, c: Placed): string {
  if (c.y - p.y <= H + GAP_LAYER) {
    const [x1, y1, x2, y2] = [p.x + W / 2, p.y + H, c.x + W / 2, c.y];
    const bend = Math.max(12, (y2 - y1) / 2);
    return `M${x1},${y1} C${x1},${y1 + bend} ${x2},${y2 - bend} ${x2},${y2}`;
  }
  const [x1, y1, x2, y2] = [p.x + W, p.y + H / 2, c.x + W, c.y + H / 2];
  const out = Math.max(x1, x2) + BOW;
  return `M${x1},${y1} C${out},${y1} ${out},${y2} ${x2},${y2}`;
}

/** How far an edge that skips rows bows out to the right of the boxes it passes. */
const BOW = 36;

/** A box holds about 20 characters of its second line. */
const clip = (text: string) => (text.length > 20 ? `${text.slice(0, 19)}…` : text);
