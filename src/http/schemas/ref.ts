import { type Static, type TSchema, Type } from 'typebox';

/**
 * A reference to a shared schema (one registered with app.addSchema under its $id), typed as the
 * schema itself. Shared schemas become named components of the OpenAPI document and named types in
 * generated clients; a schema with an $id must only ever be used through ref(), never inlined twice.
 */
export function ref<T extends TSchema & { $id?: string }>(schema: T) {
  if (!schema.$id) throw new Error('ref() needs a schema with an $id');
  return Type.Unsafe<Static<T>>(Type.Ref(schema.$id));
}
