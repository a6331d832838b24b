import { Type } from 'typebox';
import { PROBLEM_CODES, type ProblemCode } from '../problem.js';

export const ProblemSchema = Type.Object(
  {
    type: Type.String({ description: 'URI naming the problem type: urn:baton:problem:<code>' }),
    title: Type.String(),
    status: Type.Integer(),
    code: Type.Unsafe<ProblemCode>(
      Type.String({
        enum: Object.keys(PROBLEM_CODES),
        description: 'Stable machine-readable code; branch on this.',
      }),
    ),
    detail: Type.String({ description: 'What went wrong, naming the field or resource.' }),
    instance: Type.Optional(Type.String()),
    request_id: Type.Optional(Type.String()),
    errors: Type.Optional(
      Type.Array(Type.Object({ field: Type.String(), message: Type.String() }), {
        description: 'For validation_failed: each invalid field, e.g. jobs[3].priority.',
      }),
    ),
  },
  { $id: 'Problem', description: 'RFC 9457 problem details' },
);
