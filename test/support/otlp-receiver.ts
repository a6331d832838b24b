import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A span as an OTLP/JSON export carries it, with its attributes flattened to plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  /** OTLP's numbers: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string }[];
  status: { code?: number; message?: string };
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  /** The resource's attributes (service.name, ...), flattened. */
  resource: Record<string, unknown>;
}

export const KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

type OtlpValue = {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
};
type OtlpAttributes = { key: string; value: OtlpValue }[] | undefined;

function flatten(attributes: OtlpAttributes): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, value } of attributes ?? []) {
    out[key] =
      value.stringValue ??
      (value.intValue !== undefined ? Number(value.intValue) : undefined) ??
      value.doubleValue ??
      value.boolValue;
  }
  return out;
}

/**
 * An OTLP/HTTP receiver (JSON) on a free loopback port, as an OpenTelemetry Collector's HTTP
 * receiver: POST /v1/traces answers 200 and keeps every span, with the request's headers.
 */
export async function startOtlpReceiver() {
  const spans: ReceivedSpan[] = [];
  const requests: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      requests.push(req.headers);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      for (const rs of body.resourceSpans ?? []) {
        const resource = flatten(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            spans.push({
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId || undefined,
              name: s.name,
              kind: s.kind,
              attributes: flatten(s.attributes),
              links: (s.links ?? []).map((l: { traceId: string; spanId: string }) => ({
                traceId: l.traceId,
                spanId: l.spanId,
              })),
              status: s.status ?? {},
              startTimeUnixNano: String(s.startTimeUnixNano),
              endTimeUnixNano: String(s.endTimeUnixNano),
              resource,
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    /** The endpoint, as OTEL_EXPORTER_OTLP_ENDPOINT takes it (spans go to its /v1/traces). */
    url: `http://127.0.0.1:${port}`,
    spans,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
