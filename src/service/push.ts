import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import { invalidField, queueNotFound } from '../errors.js';
import { PushAllowList } from '../push/allow-list.js';
import { newSigningSecret } from '../push/signature.js';
import {
  deletePushEndpoint,
  type PushEndpointRow,
  type PushSettings,
  readPushEndpoint,
  rotatePushSecret,
  setPushEndpoint,
} from '../queues/push-store.js';

/** A push endpoint and, only when it was just made, its secret: no read shows it again. */
export interface PushEndpointAnswer {
  row: PushEndpointRow;
  created: boolean;
  secret?: string;
}

/**
 * Push queues' endpoints (docs/push.md): set, read, rotate the signing secret, turn push off. A URL
 * is checked against BATON_PUSH_ALLOW when it is set, and again at each delivery (push/dispatcher.ts).
 */
export class PushUseCases {
  readonly allowList: PushAllowList;
  /** Told after each change, so this replica's dispatcher serves it at once (plugins/push.ts). */
  onChange: () => void = () => {};

  constructor(private readonly deps: { db: Db; config: Pick<Config, 'pushAllow'> }) {
    this.allowList = new PushAllowList(deps.config.pushAllow);
  }

  async set(queue: string, s: PushSettings): Promise<PushEndpointAnswer> {
    const url = pushUrl(s.url);
    const target = await this.allowList.resolve(url);
    if ('refused' in target) throw invalidField('url', `is refused: ${target.refused}`);
    const secret = newSigningSecret();
    const { row, created } = await setPushEndpoint(
      this.deps.db,
      queue,
      { ...s, url: url.toString() },
      secret,
    );
    this.onChange();
    return created ? { row, created, secret } : { row, created };
  }

  async read(queue: string): Promise<PushEndpointRow> {
    const row = await readPushEndpoint(this.deps.db, queue);
    if (!row) throw queueNotFound(queue, ' as a push queue');
    return row;
  }

  async rotate(queue: string, overlapMs: number): Promise<PushEndpointAnswer> {
    const secret = newSigningSecret();
    const row = await rotatePushSecret(this.deps.db, queue, secret, overlapMs);
    if (!row) throw queueNotFound(queue, ' as a push queue');
    this.onChange();
    return { row, created: false, secret };
  }

  async remove(queue: string): Promise<void> {
    if (!(await deletePushEndpoint(this.deps.db, queue))) throw queueNotFound(queue, ' as a push queue');
    this.onChange();
  }
}

/**
 * A push URL: http or https, no user name or password in it (a credential in a URL ends up in logs
 * and screens; the signature is how an endpoint knows the call is Baton's), no fragment.
 */
function pushUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw invalidField('url', 'must be an absolute http or https URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw invalidField('url', 'must be http or https');
  if (url.username || url.password) throw invalidField('url', 'must not carry a user name or password');
  if (url.hash) throw invalidField('url', 'must not have a fragment');
  return url;
}
