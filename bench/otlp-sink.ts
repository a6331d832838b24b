import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Where a traced Baton sends its spans in the benchmarks: an OTLP/HTTP endpoint on loopback that
 * answers 200, as a collector would, and counts the spans it was sent (so a run shows its spans
 * arrived), keeping none of them.
 */
export async function startOtlpSink() {
  let spans = 0;
  let exports = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      exports++;
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans?: { scopeSpans?: { spans?: unknown[] }[] }[];
      };
      for (const rs of body.resourceSpans ?? [])
        for (const ss of rs.scopeSpans ?? []) spans += ss.spans?.length ?? 0;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get spans() {
      return spans;
    },
    get exports() {
      return exports;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
