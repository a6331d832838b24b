import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import {
  DOT_SEGMENT_MESSAGE,
  isPrintable,
  JOB_ID_PATTERN,
  LEASE_TOKEN_PATTERN,
  PRINTABLE_FORMAT,
  PRINTABLE_PATTERN,
  QUEUE_NAME_PATTERN,
} from '../jobs/limits.js';
import { lazyValidator } from './lazy-compile.js';
import type { FieldError } from './problem.js';
import { isTimestamp, TIMESTAMP_MESSAGE } from './timestamps.js';

/**
 * Request validation. Bodies are validated strictly: no type coercion ("5" is not 5) and unknown
 * fields are rejected, so a typo such as `delay` for `delay_ms` is a 400 naming the field rather
 * than silently ignored. Query strings and path parameters arrive as text, so they are coerced, and
 * an integer among them must be written as a plain decimal integer first (plainIntegers below).
 */
// ajv-formats is CommonJS; under NodeNext its default export arrives as the module object.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

function makeAjv(coerce: boolean) {
  const ajv = new Ajv({
    coerceTypes: coerce ? 'array' : false,
    useDefaults: true,
    removeAdditional: false,
    allErrors: false,
    strict: false,
    // Checking each schema against JSON Schema's meta-schema compiled that meta-schema per instance,
    // 110 ms of every start; test/http/schemas-compile.test.ts checks every route's schema instead.
    validateSchema: false,
  });
  addFormats(ajv);
  // What the schema calls a date-time is exactly what Baton can store (see timestamps.ts).
  ajv.addFormat('date-time', { type: 'string', validate: isTimestamp });
  ajv.addFormat(PRINTABLE_FORMAT, { type: 'string', validate: isPrintable });
  // An integer's int32/int64 format tells clients which type holds it; its minimum and maximum are
  // what the server checks (and what its 400 names), so the width itself is not checked again.
  for (const width of ['int32', 'int64']) ajv.addFormat(width, { type: 'number', validate: () => true });
  return ajv;
}

/**
 * Fastify's validator factory (schemaController.compilersFactory.buildValidator). It receives the
 * shared schemas added with app.addSchema, so that `$ref: 'Job'` in a route resolves.
 *
 * The compiled validators are kept per set of shared schemas for the whole process: ajv compiles a
 * route's schema once per schema object, and every app built in this process (replicas in one test
 * file, the files of a test worker) declares the same schema objects. Compiling them again cost each
 * app build about a second of CPU. Each is compiled when first used (lazy-compile.ts).
 */
export function buildValidator(
  externalSchemas: Record<string, unknown> = {},
): (route: { schema: unknown; httpPart?: string }) => ValidateFunction {
  const key = JSON.stringify(externalSchemas);
  let compilers = validatorsBySchemas.get(key);
  if (!compilers) {
    compilers = { strict: makeAjv(false), lenient: makeAjv(true), checked: new WeakMap() };
    for (const schema of Object.values(externalSchemas)) {
      compilers.strict.addSchema(schema as object);
      compilers.lenient.addSchema(schema as object);
    }
    if (validatorsBySchemas.size >= SCHEMA_SETS_KEPT) validatorsBySchemas.clear();
    validatorsBySchemas.set(key, compilers);
  }
  const { strict, lenient, checked } = compilers;
  return ({ schema, httpPart }) => {
    if (httpPart === 'body') return lazyValidator(() => strict.compile(schema as object));
    let validate = checked.get(schema as object);
    if (!validate) {
      validate = lazyValidator(() => plainIntegers(schema, lenient.compile(schema as object)));
      checked.set(schema as object, validate);
    }
    return validate;
  };
}

interface Compilers {
  strict: Ajv;
  lenient: Ajv;
  /** Query and path validators, each wrapped once by plainIntegers. */
  checked: WeakMap<object, ValidateFunction>;
}
const validatorsBySchemas = new Map<string, Compilers>();
/** A process builds apps with one set of shared schemas; a bound in case one ever varies. */
const SCHEMA_SETS_KEPT = 4;

/** What a query or path integer may look like: digits, no leading zero, a minus sign for negatives. */
const PLAIN_INTEGER = /^(?:0|-?[1-9][0-9]*)$/;
export const PLAIN_INTEGER_MESSAGE = 'must be an integer written in plain decimal digits, such as 250';

/**
 * ajv's coercion turns any text JavaScript reads as a number into one: `0x10` is 16, and `+5`, `5e3`,
 * ` 5` and `-0` pass as 5, 5000, 5 and 0. A client sending those meant something else or probes; a
 * text integer is refused unless written plainly, before ajv coerces it, naming the field.
 */
function plainIntegers(schema: unknown, validate: ValidateFunction): ValidateFunction {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> }).properties ?? {};
  const integers = Object.keys(properties).filter((name) => properties[name]!.type === 'integer');
  if (integers.length === 0) return validate;
  const checked = ((data: unknown) => {
    for (const name of integers) {
      const value = (data as Record<string, unknown> | null)?.[name];
      if (typeof value === 'string' && !PLAIN_INTEGER.test(value)) {
        checked.errors = [
          {
            instancePath: `/${name}`,
            schemaPath: `#/properties/${name}/type`,
            keyword: 'plainInteger',
            params: {},
            message: PLAIN_INTEGER_MESSAGE,
          },
        ];
        return false;
      }
    }
    const valid = validate(data);
    checked.errors = validate.errors;
    return valid;
  }) as ValidateFunction;
  return checked;
}

/** `/jobs/3/priority` -> `jobs[3].priority` */
function fieldPath(instancePath: string, child?: string): string {
  const parts = instancePath.split('/').slice(1);
  if (child !== undefined) parts.push(child);
  return parts
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');
}

export function fieldErrors(errors: ErrorObject[], part: string | undefined): FieldError[] {
  return withAlternativesJoined(errors).map((e) => {
    const params = e.params as Record<string, unknown>;
    if (e.keyword === 'required') {
      return { field: fieldPath(e.instancePath, String(params.missingProperty)), message: 'is required' };
    }
    if (e.keyword === 'additionalProperties') {
      return {
        field: fieldPath(e.instancePath, String(params.additionalProperty)),
        message: 'is not a known field',
      };
    }
    const field = fieldPath(e.instancePath) || (part === 'body' ? 'body' : (part ?? 'request'));
    return { field, message: messageOf(e) };
  });
}

/**
 * A value that matches none of a field's alternatives (anyOf: a job id or {"item": n}, an integer or
 * null) gets one error, not one per alternative plus "must match a schema in anyOf": a wrong type is
 * "must be string or object"; a value of a right type keeps that alternative's own errors (an object
 * missing its field says so).
 */
function withAlternativesJoined(errors: ErrorObject[]): ErrorObject[] {
  const anyOfs = errors.filter((e) => e.keyword === 'anyOf');
  if (anyOfs.length === 0) return errors;
  const branchOf = (e: ErrorObject) =>
    anyOfs.find((a) => a !== e && e.schemaPath.startsWith(`${a.schemaPath}/`));
  const out: ErrorObject[] = [];
  for (const e of errors) {
    if (branchOf(e)) continue;
    if (e.keyword !== 'anyOf') {
      out.push(e);
      continue;
    }
    const branches = errors.filter((b) => branchOf(b) === e);
    const deeper = branches.filter((b) => b.keyword !== 'type' || b.instancePath !== e.instancePath);
    if (deeper.length > 0) {
      out.push(...deeper);
      continue;
    }
    const types = [...new Set(branches.map((b) => String((b.params as { type?: unknown }).type)))];
    out.push({ ...e, keyword: 'type', message: `must be ${types.join(' or ')}` });
  }
  return out;
}

/** Messages that say what to send where ajv's would only say what failed. */
function messageOf(e: ErrorObject): string {
  const params = e.params as Record<string, unknown>;
  if (e.keyword === 'format' && params.format === 'date-time') return TIMESTAMP_MESSAGE;
  if (e.keyword === 'format' && params.format === 'uuid')
    return 'must be a lease token (a UUID as claims issue them)';
  if (e.keyword === 'format' && params.format === PRINTABLE_FORMAT) return PRINTABLE_MESSAGE;
  if (e.keyword === 'pattern') return PATTERN_MESSAGES[String(params.pattern)] ?? e.message ?? 'is invalid';
  // The one `not` of the schemas: a name being created is not "." or ".." (schemas/common.ts).
  if (e.keyword === 'not') return DOT_SEGMENT_MESSAGE;
  return e.message ?? 'is invalid';
}

const PRINTABLE_MESSAGE = 'must not contain control characters or unpaired UTF-16 surrogates';

const PATTERN_MESSAGES: Record<string, string> = {
  [JOB_ID_PATTERN]: 'must be a job id: a decimal number without leading zeros, at most 18 digits',
  [LEASE_TOKEN_PATTERN]: 'must be a lease token: a UUID such as 3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001',
  [PRINTABLE_PATTERN]: PRINTABLE_MESSAGE,
  [QUEUE_NAME_PATTERN]: 'must be a queue name: 1-128 letters, digits, ".", "_" or "-"',
};
