import { Type } from 'typebox';

/** The probes' answers. */
export const Health = Type.Object({ status: Type.Literal('ok') }, { $id: 'Health' });
export const Readiness = Type.Object({ status: Type.Literal('ready') }, { $id: 'Readiness' });
