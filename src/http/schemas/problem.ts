import { Type } from 'typebox';
import { type ProblemCode as Code, PROBLEM_CODES } from '../problem.js';
import { Int32 } from './common.js';
import { ref } from './ref.js';

export const ProblemCode = Type.Unsafe<Code>(
  Type.String({
    $id: 'ProblemCode',
    enum: Object.keys(PROBLEM_CODES),
    description: 'Stable machine-readable code; branch on this.',
  }),
);

export const FieldError = Type.Object(
  { field: Type.String(), message: Type.String() },
  { $id: 'FieldError', description: 'One invalid field, e.g. jobs[3].priority, and what is wrong with it.' },
);

export const ProblemSchema = Type.Object(
  {
    type: Type.String({ description: 'URI naming the problem type: urn:baton:problem:<code>' }),
    title: Type.String(),
    status: Int32(),
    code: ref(ProblemCode),
    detail: Type.String({ description: 'What went wrong, naming the field or resource.' }),
    instance: Type.Optional(Type.String()),
    request_id: Type.Optional(Type.String()),
    errors: Type.Optional(
      Type.Array(ref(FieldError), {
        description: 'For validation_failed: each invalid field, e.g. jobs[3].priority.',
      }),
    ),
  },
  { $id: 'Problem', description: 'RFC 9457 problem details' },
);
