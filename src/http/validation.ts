import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FieldError } from './problem.js';

/**
 * Request validation. Bodies are validated strictly: no type coercion ("5" is not 5) and unknown
 * fields are rejected, so a typo such as `delay` for `delay_ms` is a 400 naming the field rather
 * than silently ignored. Query strings and path parameters arrive as text, so they are coerced.
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
  });
  addFormats(ajv);
  return ajv;
}

/**
 * Fastify's validator factory (schemaController.compilersFactory.buildValidator). It receives the
 * shared schemas added with app.addSchema, so that `$ref: 'Job'` in a route resolves.
 */
export function buildValidator(
  externalSchemas: Record<string, unknown> = {},
): (route: { schema: unknown; httpPart?: string }) => ValidateFunction {
  const strict = makeAjv(false);
  const lenient = makeAjv(true);
  for (const schema of Object.values(externalSchemas)) {
    strict.addSchema(schema as object);
    lenient.addSchema(schema as object);
  }
  return ({ schema, httpPart }) => (httpPart === 'body' ? strict : lenient).compile(schema as object);
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
  return errors.map((e) => {
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
    return { field, message: e.message ?? 'is invalid' };
  });
}
