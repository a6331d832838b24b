import { readFileSync } from 'node:fs';
import { type ApiKey, parseApiKeys } from './auth/api-keys.js';
import { type Config, ConfigError } from './config.js';
import { type FileSchedule, fileScheduleProblems, loadSchedulesFile } from './schedules/file.js';
import { parseSqsCredentials, type SqsCredential } from './sqs/credentials.js';

/**
 * What config names but does not parse, because its rules are the domain's: the API keys
 * (BATON_API_KEYS, BATON_API_KEYS_FILE), the SQS key pairs (BATON_SQS_CREDENTIALS,
 * BATON_SQS_CREDENTIALS_FILE) and the schedules file (BATON_SCHEDULES_FILE). Config holds them as it
 * found them (JSON text, paths); here each is read and handed to the module that owns its rules
 * (auth/api-keys.ts, sqs/credentials.ts, schedules/file.ts). server.ts loads them right after config,
 * before it starts or migrates a database, and a bad one stops start-up as a bad setting does: a
 * ConfigError whose every message names its variable. buildApp hands each to the plugin that uses it.
 */
export interface StartupInputs {
  /** Every configured API key, inline and from the file. None: authentication is off. */
  apiKeys: ApiKey[];
  /** Every configured SQS key pair, inline and from the file. */
  sqsCredentials: SqsCredential[];
  /** The schedules of BATON_SCHEDULES_FILE; undefined when it is unset. */
  fileSchedules: FileSchedule[] | undefined;
}

export function loadStartupInputs(config: Config): StartupInputs {
  const problems: string[] = [];
  /** `parse` applied to a setting's value, if it is set; what it throws is a problem naming the variable. */
  const read = <T>(
    variable: string,
    value: string | undefined,
    parse: (value: string) => T,
  ): T | undefined => {
    if (value === undefined) return undefined;
    try {
      return parse(value);
    } catch (err) {
      problems.push(`${variable} ${(err as Error).message}`);
      return undefined;
    }
  };
  const apiKeys = [
    ...(read('BATON_API_KEYS', config.apiKeys, parseApiKeys) ?? []),
    ...(read('BATON_API_KEYS_FILE', config.apiKeysFile, (path) => parseApiKeys(readText(path))) ?? []),
  ];
  // The file is held to the request body's size limit.
  const fileSchedules = read('BATON_SCHEDULES_FILE', config.schedulesFile, (path) =>
    loadSchedulesFile(path, config.bodyLimitBytes),
  );
  const sqsCredentials = [
    ...(read('BATON_SQS_CREDENTIALS', config.sqsCredentials, parseSqsCredentials) ?? []),
    ...(read('BATON_SQS_CREDENTIALS_FILE', config.sqsCredentialsFile, (path) =>
      parseSqsCredentials(readText(path)),
    ) ?? []),
  ];

  // The rules between them and other settings, once each is read.
  if (problems.length === 0 && new Set(apiKeys.map((k) => k.name)).size !== apiKeys.length) {
    problems.push('BATON_API_KEYS and BATON_API_KEYS_FILE name the same key twice');
  }
  if (problems.length === 0) {
    const names = new Set(apiKeys.map((k) => k.name));
    const ids = new Set<string>();
    for (const pair of sqsCredentials) {
      if (!names.has(pair.apiKey)) {
        problems.push(
          `BATON_SQS_CREDENTIALS pair ${pair.accessKeyId} names API key "${pair.apiKey}", which is not configured`,
        );
      }
      if (ids.has(pair.accessKeyId)) {
        problems.push(`BATON_SQS_CREDENTIALS and BATON_SQS_CREDENTIALS_FILE both hold ${pair.accessKeyId}`);
      }
      ids.add(pair.accessKeyId);
    }
  }
  if (problems.length === 0 && fileSchedules) {
    problems.push(
      ...fileScheduleProblems(fileSchedules, {
        minIntervalMs: config.scheduleMinIntervalMs,
        maxSchedules: config.maxSchedules,
      }),
    );
  }
  // Safe default: with no keys, only this machine may talk to Baton.
  if (
    problems.length === 0 &&
    apiKeys.length === 0 &&
    !isLoopback(config.host) &&
    !config.allowUnauthenticated
  ) {
    problems.push(
      `HOST=${config.host} would expose Baton without authentication: configure BATON_API_KEYS or ` +
        'BATON_API_KEYS_FILE, bind a loopback address, or set BATON_ALLOW_UNAUTHENTICATED=true',
    );
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { apiKeys, sqsCredentials, fileSchedules };
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot be read: ${(err as Error).message}`);
  }
}

/**
 * Settings that start, but leave something open the operator may not mean to: server.ts logs each
 * once at start-up as a warning, one line saying what to set.
 */
export function startupWarnings(config: Config, { apiKeys }: StartupInputs): string[] {
  const warnings: string[] = [];
  if (apiKeys.length === 0 && !isLoopback(config.host)) {
    warnings.push('BATON_ALLOW_UNAUTHENTICATED: serving a non-loopback address with no API keys');
  }
  // Keys limited to queue patterns are tenants (SQS pairs map onto such keys, so they are covered),
  // and open /metrics labels every queue: each tenant could read the others' queue names there.
  const scoped = apiKeys.filter((k) => k.queues).map((k) => k.name);
  if (scoped.length > 0 && config.openEndpoints.includes('metrics')) {
    const rest = config.openEndpoints.filter((e) => e !== 'metrics');
    warnings.push(
      `/metrics answers without a key and shows every queue's name, while API keys limited to queue ` +
        `patterns (${scoped.join(', ')}) keep tenants apart: set BATON_OPEN_ENDPOINTS=${rest.join(',') || 'none'} ` +
        'so that /metrics needs a key without queue limits (or keep /metrics on a network only you reach)',
    );
  }
  return warnings;
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}
