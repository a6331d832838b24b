import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

/**
 * Issue 17: what a V8 heap snapshot (.heapsnapshot) holds, grouped so a person can act on it:
 * self size by constructor (or node type), retained size of the largest dominator subtrees, and the
 * largest strings and array buffers. `npx tsx bench/heap-summary.ts FILE.heapsnapshot [--top N] [--retainers Date]`.
 * Retained sizes come from the dominator tree (Cooper–Harvey–Kennedy, iterative) over the
 * snapshot's edges, skipping weak edges as DevTools does.
 */

interface Snapshot {
  snapshot: {
    meta: {
      node_fields: string[];
      node_types: [string[], ...unknown[]];
      edge_fields: string[];
      edge_types: [string[], ...unknown[]];
    };
    node_count: number;
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

export function summarise(file: string, top = 25, retainersOf?: string): string {
  const s = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const nf = s.snapshot.meta.node_fields;
  const ef = s.snapshot.meta.edge_fields;
  const NF = nf.length;
  const EF = ef.length;
  const nTypes = s.snapshot.meta.node_types[0];
  const eTypes = s.snapshot.meta.edge_types[0];
  const iType = nf.indexOf('type');
  const iName = nf.indexOf('name');
  const iSize = nf.indexOf('self_size');
  const iEdges = nf.indexOf('edge_count');
  const eType = ef.indexOf('type');
  const eName = ef.indexOf('name_or_index');
  const eTo = ef.indexOf('to_node');
  const weak = eTypes.indexOf('weak');
  const shortcut = eTypes.indexOf('shortcut');
  const count = s.nodes.length / NF;

  const firstEdge = new Uint32Array(count + 1);
  for (let i = 0, e = 0; i < count; i++) {
    firstEdge[i] = e;
    e += s.nodes[i * NF + iEdges]! * EF;
  }
  firstEdge[count] = s.edges.length;

  const typeOf = (i: number) => nTypes[s.nodes[i * NF + iType]!]!;
  const nameOf = (i: number) => s.strings[s.nodes[i * NF + iName]!]!;
  const sizeOf = (i: number) => s.nodes[i * NF + iSize]!;
  const label = (i: number) => {
    const t = typeOf(i);
    if (t === 'object' || t === 'native') return nameOf(i);
    if (t === 'closure') return `(closure) ${nameOf(i)}`;
    return `(${t})`;
  };

  // Reverse postorder from the root (node 0) over strong edges, then dominators.
  const order = new Int32Array(count).fill(-1);
  const post: number[] = [];
  const stack: [number, number][] = [[0, firstEdge[0]!]];
  order[0] = -2;
  while (stack.length) {
    const top = stack[stack.length - 1]!;
    const [n, e] = top;
    if (e < firstEdge[n + 1]!) {
      top[1] = e + EF;
      const t = s.edges[e + eType]!;
      if (t === weak || t === shortcut) continue;
      const to = s.edges[e + eTo]! / NF;
      if (order[to] === -1) {
        order[to] = -2;
        stack.push([to, firstEdge[to]!]);
      }
    } else {
      stack.pop();
      order[n] = post.length;
      post.push(n);
    }
  }
  const preds: number[][] = Array.from({ length: count }, () => []);
  for (let n = 0; n < count; n++) {
    if (order[n]! < 0) continue;
    for (let e = firstEdge[n]!; e < firstEdge[n + 1]!; e += EF) {
      const t = s.edges[e + eType]!;
      if (t === weak || t === shortcut) continue;
      const to = s.edges[e + eTo]! / NF;
      if (order[to]! >= 0) preds[to]!.push(n);
    }
  }
  const idom = new Int32Array(count).fill(-1);
  idom[0] = 0;
  const intersect = (a: number, b: number) => {
    while (a !== b) {
      while (order[a]! < order[b]!) a = idom[a]!;
      while (order[b]! < order[a]!) b = idom[b]!;
    }
    return a;
  };
  for (let changed = true; changed; ) {
    changed = false;
    for (let k = post.length - 2; k >= 0; k--) {
      const n = post[k]!;
      let d = -1;
      for (const p of preds[n]!) if (idom[p] !== -1) d = d === -1 ? p : intersect(p, d);
      if (d !== -1 && idom[n] !== d) {
        idom[n] = d;
        changed = true;
      }
    }
  }
  const retained = new Float64Array(count);
  for (const n of post) retained[n]! += sizeOf(n);
  for (const n of post) if (n !== 0 && idom[n]! >= 0) retained[idom[n]!]! += retained[n]!;

  const mb = (b: number) => `${(b / 2 ** 20).toFixed(2)} MiB`;
  const lines: string[] = [];
  let total = 0;
  const byLabel = new Map<string, { size: number; n: number }>();
  for (let i = 0; i < count; i++) {
    if (order[i]! < 0) continue;
    total += sizeOf(i);
    const l = label(i);
    const g = byLabel.get(l) ?? { size: 0, n: 0 };
    g.size += sizeOf(i);
    g.n++;
    byLabel.set(l, g);
  }
  lines.push(`${file}: ${count} nodes, reachable self size ${mb(total)}`);
  lines.push('', `self size by constructor / type (top ${top}):`);
  for (const [l, g] of [...byLabel].sort((a, b) => b[1].size - a[1].size).slice(0, top))
    lines.push(`  ${mb(g.size).padStart(11)}  ${String(g.n).padStart(7)}  ${l.slice(0, 100)}`);

  // The largest retainers that are not the root's synthetic children: what a fix would free.
  const path = (i: number) => {
    const names: string[] = [];
    for (let n = i, hops = 0; n !== 0 && hops < 6; n = idom[n]!, hops++) names.push(label(n).slice(0, 40));
    return names.join(' < ');
  };
  const candidates = [];
  for (let i = 1; i < count; i++) {
    if (order[i]! < 0) continue;
    const t = typeOf(i);
    if (t === 'synthetic' || t === 'hidden') continue;
    if (retained[i]! >= 256 * 1024) candidates.push(i);
  }
  // Keep only subtrees whose dominator is not itself listed (the outermost big holders).
  const listed = new Set(candidates);
  const outer = candidates.filter((i) => {
    for (let n = idom[i]!; n !== 0; n = idom[n]!)
      if (listed.has(n) && retained[n]! < 4 * retained[i]!) return false;
    return true;
  });
  lines.push('', `largest retained subtrees (≥ 256 KiB; outermost of nested ones):`);
  for (const i of outer.sort((a, b) => retained[b]! - retained[a]!).slice(0, top))
    lines.push(`  ${mb(retained[i]!).padStart(11)}  ${path(i)}`);

  if (retainersOf) {
    // Who holds objects of this constructor: the chain of retainers (first strong edge into each
    // node, by edge name), for a few instances, counted by chain.
    const firstRetainer = new Int32Array(count).fill(-1);
    const edgeName = new Array<string>(count);
    for (let n = 0; n < count; n++) {
      for (let e = firstEdge[n]!; e < firstEdge[n + 1]!; e += EF) {
        const t = s.edges[e + eType]!;
        if (t === weak || t === shortcut) continue;
        const to = s.edges[e + eTo]! / NF;
        if (firstRetainer[to] === -1 && to !== n) {
          firstRetainer[to] = n;
          const nameOrIndex = s.edges[e + eName]!;
          const kind = eTypes[t];
          edgeName[to] =
            kind === 'element' || kind === 'hidden' ? `[${nameOrIndex}]` : String(s.strings[nameOrIndex]);
        }
      }
    }
    const chains = new Map<string, number>();
    for (let i = 0; i < count; i++) {
      if (order[i]! < 0 || label(i) !== retainersOf) continue;
      const parts: string[] = [];
      for (let n = i, hops = 0; n > 0 && hops < 12; n = firstRetainer[n]!, hops++)
        parts.push(`${label(n).slice(0, 30)}.${(edgeName[n] ?? '').replace(/\d+/g, 'N').slice(0, 24)}`);
      const k = parts.join(' < ');
      chains.set(k, (chains.get(k) ?? 0) + 1);
    }
    lines.push('', `retainer chains of ${retainersOf} (count):`);
    for (const [k, c] of [...chains].sort((a, b) => b[1] - a[1]).slice(0, top))
      lines.push(`  ${String(c).padStart(6)}  ${k}`);
  }

  lines.push('', 'largest strings:');
  const strings = [];
  for (let i = 0; i < count; i++) {
    const t = typeOf(i);
    if (order[i]! >= 0 && (t === 'string' || t === 'concatenated string' || t === 'sliced string'))
      strings.push(i);
  }
  for (const i of strings.sort((a, b) => sizeOf(b) - sizeOf(a)).slice(0, 12))
    lines.push(`  ${mb(sizeOf(i)).padStart(11)}  ${JSON.stringify(nameOf(i).slice(0, 80))}`);
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { top: { type: 'string', default: '25' }, retainers: { type: 'string' } },
  });
  if (!positionals[0])
    throw new Error('usage: heap-summary.ts FILE.heapsnapshot [--top N] [--retainers Constructor]');
  console.log(summarise(positionals[0], Number(values.top), values.retainers));
}
