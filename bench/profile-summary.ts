import { readdirSync, readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';

/**
 * Summarise a V8 CPU profile (`node --cpu-prof`) of the Baton server: self time grouped into
 * categories by where the code lives (PostgreSQL client, Kysely, Fastify, validation, JSON, HTTP and
 * sockets, Baton's own code, GC), plus the top functions. Self time is the time a function itself
 * was on the CPU, so a category counts its own work, not the work of what it calls.
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const CATEGORIES: [string, (f: CallFrame) => boolean][] = [
  ['idle', (f) => f.functionName === '(idle)'],
  ['GC', (f) => f.functionName === '(garbage collector)'],
  [
    'PostgreSQL client (pg, pg-protocol, type parsers)',
    (f) =>
      /node_modules\/(pg|pg-protocol|pg-pool|pg-types|postgres-date|postgres-array|postgres-interval|postgres-bytea|pg-int8)\//.test(
        f.url,
      ),
  ],
  ['Kysely', (f) => f.url.includes('node_modules/kysely/')],
  [
    'JSON serialisation (fast-json-stringify, JSON.stringify)',
    (f) =>
      f.url.includes('fast-json-stringify') ||
      (f.url === '' && /^(stringify|JSONStringify|JsonStringify)$/.test(f.functionName)),
  ],
  [
    'JSON parsing (secure-json-parse, JSON.parse)',
    (f) =>
      f.url.includes('secure-json-parse') ||
      (f.url === '' && /^(parse|JSONParse|JsonParse)$/.test(f.functionName)),
  ],
  [
    'Request validation (ajv, generated validators)',
    (f) => f.url.includes('node_modules/ajv') || /^validate\d*$/.test(f.functionName),
  ],
  [
    'Fastify (routing, hooks, reply)',
    (f) =>
      /node_modules\/(fastify|find-my-way|avvio|@fastify|light-my-request|toad-cache|fastify-plugin|fast-querystring|fast-decode-uri-component|safe-regex2|ret|rfdc|content-type|process-warning)\//.test(
        f.url,
      ),
  ],
  [
    'Logging (pino)',
    (f) =>
      /node_modules\/(pino|pino-std-serializers|sonic-boom|thread-stream|fast-redact|@pinojs)/.test(f.url),
  ],
  ['Metrics (prom-client)', (f) => /node_modules\/(prom-client|tdigest|bintrees)\//.test(f.url)],
  ['Baton (src/)', (f) => /\/(dist\/)?src\//.test(f.url) && !f.url.includes('node_modules')],
  [
    'HTTP and sockets (node:http, net, streams)',
    (f) =>
      /^node:(_http|http|net|stream|internal\/(streams|stream_base_commons|http|net|js_stream_socket))/.test(
        f.url,
      ),
  ],
  [
    'socket and buffer natives (writev, read, utf8 encode/decode)',
    (f) =>
      f.url === '' &&
      /^(writev|writeUtf8String|writeBuffer|writeLatin1String|read|utf8Slice|latin1Slice|utf8Write|asciiSlice|ucs2Slice|shutdown|onread)$/.test(
        f.functionName,
      ),
  ],
  ['Other Node internals', (f) => f.url.startsWith('node:')],
  ['native (program)', (f) => f.functionName === '(program)'],
];

function categoryOf(frame: CallFrame): string {
  for (const [name, test] of CATEGORIES) if (test(frame)) return name;
  return frame.url.includes('node_modules/')
    ? `other package: ${frame.url.split('node_modules/')[1]!.split('/')[0]}`
    : 'other';
}

export interface ProfileSummary {
  file: string;
  busyMs: number;
  idleMs: number;
  categories: { category: string; ms: number; share: number }[];
  topFunctions: { fn: string; ms: number; share: number }[];
}

export function summariseProfile(file: string, top = 25): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const self = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const byCategory = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let idle = 0;
  let busy = 0;
  for (const node of profile.nodes) {
    const us = self.get(node.id) ?? 0;
    if (us === 0) continue;
    const category = categoryOf(node.callFrame);
    if (category === 'idle') {
      idle += us;
      continue;
    }
    busy += us;
    byCategory.set(category, (byCategory.get(category) ?? 0) + us);
    const f = node.callFrame;
    const where = f.url
      ? `${f.url.replace(/^.*node_modules\//, '').replace(/^.*\/dist\//, '')}:${f.lineNumber + 1}`
      : 'native';
    const key = `${f.functionName || '(anonymous)'} (${where})`;
    byFunction.set(key, (byFunction.get(key) ?? 0) + us);
  }
  const rows = <K extends string>(m: Map<string, number>, key: K) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .map(
        ([k, us]) =>
          ({ [key]: k, ms: Math.round(us / 100) / 10, share: Math.round((us / busy) * 1000) / 10 }) as Record<
            K,
            string
          > & { ms: number; share: number },
      );
  return {
    file,
    busyMs: Math.round(busy / 1000),
    idleMs: Math.round(idle / 1000),
    categories: rows(byCategory, 'category'),
    topFunctions: rows(byFunction, 'fn').slice(0, top),
  };
}

/** The newest .cpuprofile in a directory. */
export function newestProfile(dir: string): string | undefined {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => resolve(dir, f));
  return files.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
}

export function formatSummary(s: ProfileSummary): string {
  const out = [
    `CPU profile ${s.file}: ${s.busyMs} ms busy (idle ${s.idleMs} ms)`,
    '  by category (self time):',
  ];
  for (const c of s.categories)
    out.push(`    ${String(c.share).padStart(5)}%  ${String(c.ms).padStart(8)} ms  ${c.category}`);
  out.push('  top functions (self time):');
  for (const f of s.topFunctions)
    out.push(`    ${String(f.share).padStart(5)}%  ${String(f.ms).padStart(8)} ms  ${f.fn}`);
  return out.join('\n');
}

// `npx tsx bench/profile-summary.ts <file.cpuprofile | directory>`
if (import.meta.main) {
  const arg = process.argv[2];
  if (!arg) {
    console.error('usage: tsx bench/profile-summary.ts <file.cpuprofile | directory>');
    process.exit(2);
  }
  const file = statSync(arg).isDirectory() ? newestProfile(arg) : arg;
  if (!file) throw new Error(`no .cpuprofile in ${arg}`);
  console.log(formatSummary(summariseProfile(file)));
}
