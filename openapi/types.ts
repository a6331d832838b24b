import openapiTS, { astToString, COMMENT_HEADER } from 'openapi-typescript';

/** TypeScript types (openapi-typescript) for a client of the given OpenAPI document. */
export async function typesFromDocument(document: unknown): Promise<string> {
  // defaultNonNullable off: a request field with a default (priority, max_jobs, ...) stays optional.
  const ast = await openapiTS(document as Parameters<typeof openapiTS>[0], { defaultNonNullable: false });
  return `${COMMENT_HEADER}${astToString(ast)}`;
}
