import { SQSClient, type SQSClientConfig } from '@aws-sdk/client-sqs';

/** Credentials the SDK signs with when the server runs without keys (it checks nothing then). */
export const ANY_CREDENTIALS = { accessKeyId: 'LOCALDEV', secretAccessKey: 'not-checked-by-the-server' };

/** An SQS client of the real AWS SDK v3, pointed at a Baton server. */
export function sqsClient(endpoint: string, config: Partial<SQSClientConfig> = {}): SQSClient {
  return new SQSClient({
    endpoint,
    region: 'us-east-1',
    credentials: ANY_CREDENTIALS,
    ...config,
  });
}

/** The error an SDK call fails with (the test fails if it succeeds). */
export async function failure(promise: Promise<unknown>): Promise<Error & Record<string, any>> {
  try {
    await promise;
  } catch (err) {
    return err as Error & Record<string, any>;
  }
  throw new Error('expected the call to fail, and it succeeded');
}
