import type { Db } from '../db/database.js';
import { DOT_SEGMENT_MESSAGE, isDotSegment } from '../jobs/limits.js';
import type { Log } from '../logger.js';
import { checkCron } from './cron.js';
import { isScheduleName, parseDefinition, type ScheduleDefinition } from './definition.js';
import { readSchedulesDocument } from './file-document.js';
import { lockForFile, writeDefinition } from './manage.js';
import {
  compareWithFile,
  databaseNow,
  definitionJson,
  deleteSchedule,
  lockFileSchedules,
  lockSchedule,
  setFileSpec,
} from './store.js';

/**
 * Schedules declared in a file (BATON_SCHEDULES_FILE, JSON or YAML), so they live in a team's
 * repository. Applied on every start, idempotently, by every replica (one at a time):
 *
 *   schedules:
 *     nightly-report:            # the schedule's name
 *       queue: reports
 *       cron: "30 2 * * *"
 *       timezone: Europe/Berlin
 *       payload: { report: nightly }
 *
 * Each schedule remembers the definition the file last gave it. On start, for each one in the file:
 * - not there yet: created;
 * - equal to the file's definition: left as it is;
 * - unchanged since the file last set it: the file's new definition is applied;
 * - changed through the API since (a PUT, pause or resume): **drifted**. The file does not
 *   overwrite it; GET shows `"drifted": true` and the start logs a warning. To take the file's
 *   version, DELETE the schedule (the next start re-creates it) or PUT the file's definition; to
 *   keep the API's, copy it into the file.
 * A schedule the file declared before and no longer does is deleted, unless it drifted: then it is
 * kept, as an API schedule.
 */

export interface FileSchedule {
  name: string;
  def: ScheduleDefinition;
}

/**
 * Read and check the file (for startup-inputs.ts: a file over BATON_BODY_LIMIT_BYTES or the nesting
 * limit, or a bad entry, stops start-up naming the file and where, or the entry and field).
 */
export function loadSchedulesFile(path: string, maxBytes: number): FileSchedule[] {
  return parseSchedules(readSchedulesDocument(path, maxBytes));
}

export function parseSchedules(doc: unknown): FileSchedule[] {
  const top = doc as { schedules?: unknown } | null;
  if (typeof top !== 'object' || top === null || Array.isArray(top)) {
    throw new Error('must be a mapping with one key, schedules');
  }
  const extra = Object.keys(top).find((k) => k !== 'schedules');
  if (extra !== undefined) throw new Error(`${extra} is not a known field (only schedules)`);
  const map = top.schedules ?? {};
  if (typeof map !== 'object' || map === null || Array.isArray(map)) {
    throw new Error('schedules must be a mapping from schedule name to schedule');
  }
  return Object.entries(map).map(([name, raw]) => {
    const at = `schedules.${name}`;
    if (!isScheduleName(name))
      throw new Error(`${at}: a name must be 1-128 letters, digits, ".", "_" or "-"`);
    if (isDotSegment(name)) throw new Error(`${at}: a name ${DOT_SEGMENT_MESSAGE}`);
    const def = parseDefinition(raw, at);
    // Checked against this machine's clock here only to fail early; the database's clock decides.
    const problem = checkCron(def.cron, def.timezone, new Date());
    if (problem) throw new Error(`${at}.${problem.field} ${problem.message}`);
    return { name, def };
  });
}

/**
 * The rules that depend on other settings, for startup-inputs.ts once the file is read: each entry's
 * cron against BATON_SCHEDULE_MIN_INTERVAL_MS, and the number of entries against BATON_MAX_SCHEDULES.
 * (The file's schedules count towards that cap for PUTs, but applying the file is never refused for
 * it: the operator wrote them.) One message per problem, each naming the entry.
 */
export function fileScheduleProblems(
  schedules: FileSchedule[],
  limits: { minIntervalMs: number; maxSchedules: number },
): string[] {
  const problems: string[] = [];
  if (schedules.length > limits.maxSchedules) {
    problems.push(
      `BATON_SCHEDULES_FILE declares ${schedules.length} schedules, more than BATON_MAX_SCHEDULES (${limits.maxSchedules})`,
    );
  }
  for (const { name, def } of schedules) {
    const problem = checkCron(def.cron, def.timezone, new Date(), limits.minIntervalMs);
    if (problem) problems.push(`BATON_SCHEDULES_FILE schedules.${name}.${problem.field} ${problem.message}`);
  }
  return problems;
}

export type FileOutcome = 'created' | 'updated' | 'unchanged' | 'drifted' | 'removed' | 'released';

/**
 * Apply the file; what happened to each schedule, by name. `minIntervalMs` is checked again here, on
 * the database's clock (startup-inputs.ts checked it on this machine's).
 */
export async function applySchedulesFile(db: Db, schedules: FileSchedule[], log: Log, minIntervalMs: number) {
  const report = await db.transaction().execute(async (trx) => {
    await lockForFile(trx);
    const now = await databaseNow(trx);
    const out: Record<string, FileOutcome> = {};
    for (const { name, def } of schedules) {
      const spec = definitionJson(def);
      const existing = await lockSchedule(trx, name);
      const cmp = existing ? await compareWithFile(trx, name, spec) : undefined;
      if (!existing || (existing.from_file && cmp?.unchanged && !cmp.same_as_spec)) {
        await writeDefinition(trx, name, def, existing, now, minIntervalMs).catch((err: Error) => {
          throw new Error(`BATON_SCHEDULES_FILE schedules.${name}: ${err.message}`);
        });
        out[name] = existing ? 'updated' : 'created';
      } else if (cmp?.same_as_spec) {
        out[name] = 'unchanged';
      } else {
        out[name] = 'drifted';
        continue;
      }
      await setFileSpec(trx, name, spec);
    }
    const declared = new Set(schedules.map((s) => s.name));
    for (const old of await lockFileSchedules(trx)) {
      if (declared.has(old.name)) continue;
      if (old.drifted) {
        await setFileSpec(trx, old.name, null);
        out[old.name] = 'released';
      } else {
        await deleteSchedule(trx, old.name);
        out[old.name] = 'removed';
      }
    }
    return out;
  });
  for (const [name, outcome] of Object.entries(report)) {
    if (outcome === 'drifted') {
      log.warn(
        { schedule: name },
        'schedule was changed through the API since BATON_SCHEDULES_FILE set it (drifted): the file does not ' +
          'overwrite it. DELETE it to take the file’s version at the next start, or copy it into the file',
      );
    }
  }
  log.info({ schedules: report }, 'schedules file applied');
  return report;
}
