import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

/**
 * The AWS CLI and boto3 as tests run them: every installation found (the ones on PATH, and Debian's
 * in /usr/bin, which .ci/run installs when none is on PATH), each with a home of its own and no
 * configuration files of the machine.
 */
export const run = promisify(execFile);

/** The distinct executables among candidates that run `args` successfully, with what they print. */
export async function found(
  candidates: string[],
  args: string[],
): Promise<{ bin: string; version: string }[]> {
  const out = new Map<string, { bin: string; version: string }>();
  for (const candidate of candidates) {
    try {
      const { stdout, stderr } = await run(candidate, args, { env: process.env, timeout: 60_000 });
      const version = `${stdout}${stderr}`.trim();
      if (!out.has(version)) out.set(version, { bin: candidate, version });
    } catch {
      // Not installed here, or without boto3.
    }
  }
  return [...out.values()];
}

/** Environment for the clients: a key pair, a region, the endpoint, and a home of their own. */
export function clientEnvironment(endpoint: string, accessKeyId: string, secretAccessKey: string) {
  const home = mkdtempSync(path.join(tmpdir(), 'baton-aws-'));
  return {
    ...process.env,
    HOME: home,
    AWS_ACCESS_KEY_ID: accessKeyId,
    AWS_SECRET_ACCESS_KEY: secretAccessKey,
    AWS_DEFAULT_REGION: 'us-east-1',
    AWS_DEFAULT_OUTPUT: 'json',
    AWS_PAGER: '',
    AWS_CONFIG_FILE: path.join(home, 'config'),
    AWS_SHARED_CREDENTIALS_FILE: path.join(home, 'credentials'),
    AWS_EC2_METADATA_DISABLED: 'true',
    SQS_ENDPOINT: endpoint,
  };
}
