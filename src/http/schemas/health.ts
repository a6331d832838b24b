import { Type } from 'typebox';

const release = {
  version: Type.String({ description: "This replica's release (package.json's version)." }),
  schema: Type.String({
    description:
      'The newest migration this release knows and applies: the schema it runs. Replicas of two releases report two during a rolling upgrade.',
  }),
};

/** The probes' answers. */
export const Health = Type.Object({ status: Type.Literal('ok'), ...release }, { $id: 'Health' });
export const Readiness = Type.Object(
  {
    status: Type.Literal('ready'),
    ...release,
    database_schema: Type.Union([Type.String(), Type.Null()], {
      description:
        'The newest migration applied in the database, by whichever release: the same as `schema`, or newer while a newer release rolls out.',
    }),
  },
  { $id: 'Readiness' },
);
