import http, { type IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';

export interface DeliveryRequest {
  url: URL;
  /** The address the allow-list checked (allow-list.ts): the connection goes there, whatever DNS says now. */
  address: string;
  family: 4 | 6;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  /** Bytes of the answer's body read at most; the rest is not read. */
  maxAnswerBytes: number;
  signal: AbortSignal;
  /**
   * Keeps connections to the endpoint open between deliveries (one per queue and replica). A
   * connection is opened only to an address the allow-list checked, so a reused one goes there too.
   */
  agent: http.Agent;
}

export type DeliveryAnswer =
  | { kind: 'answer'; status: number; headers: IncomingHttpHeaders; body: Buffer; cut: boolean; ms: number }
  | { kind: 'failed'; reason: 'timeout' | 'connection' | 'stopped'; message: string; ms: number };

/**
 * One POST of a job to its endpoint, on node:http(s) rather than fetch: a new connection is pinned to
 * the checked address (a lookup that answers only it; TLS still verifies the URL's host name), a
 * redirect is an answer like any other (never followed: a 3xx could lead anywhere), the answer is
 * read up to a bound, and the whole exchange, connecting included, has one deadline.
 */
export function deliver(req: DeliveryRequest): Promise<DeliveryAnswer> {
  const started = performance.now();
  const ms = () => Math.round(performance.now() - started);
  const pinned: LookupFunction = (_host, opts, cb) => {
    if ((opts as { all?: boolean }).all) cb(null, [{ address: req.address, family: req.family }]);
    else cb(null, req.address, req.family);
  };
  const send = req.url.protocol === 'https:' ? https.request : http.request;
  return new Promise((resolve) => {
    let settled = false;
    const finish = (a: DeliveryAnswer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.signal.removeEventListener('abort', onAbort);
      resolve(a);
    };
    const outgoing = send(req.url, {
      method: 'POST',
      headers: { ...req.headers, 'content-length': String(Buffer.byteLength(req.body)) },
      lookup: pinned,
      agent: req.agent,
    });
    const fail = (reason: 'timeout' | 'connection' | 'stopped', message: string) => {
      finish({ kind: 'failed', reason, message, ms: ms() });
      outgoing.destroy();
    };
    const timer = setTimeout(() => fail('timeout', `no answer within ${req.timeoutMs} ms`), req.timeoutMs);
    const onAbort = () => fail('stopped', 'the replica is stopping');
    req.signal.addEventListener('abort', onAbort, { once: true });
    outgoing.on('error', (err) => fail('connection', err.message));
    outgoing.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let cut = false;
      res.on('data', (chunk: Buffer) => {
        if (cut) return;
        if (size + chunk.length > req.maxAnswerBytes) {
          chunks.push(chunk.subarray(0, req.maxAnswerBytes - size));
          cut = true;
          finish({
            kind: 'answer',
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks),
            cut,
            ms: ms(),
          });
          res.destroy();
          return;
        }
        chunks.push(chunk);
        size += chunk.length;
      });
      res.on('end', () =>
        finish({
          kind: 'answer',
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks),
          cut,
          ms: ms(),
        }),
      );
      res.on('error', (err) => fail('connection', err.message));
    });
    outgoing.end(req.body);
  });
}
