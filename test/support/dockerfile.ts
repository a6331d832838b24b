import fs from 'node:fs';

/**
 * The parts of the Dockerfile's runtime stage that the production-layout test reproduces without
 * Docker: its base image, its install command, its environment, its health check and its command.
 */
export interface RuntimeStage {
  image: string;
  install: string[];
  env: Record<string, string>;
  healthcheck: string[];
  cmd: string[];
}

export function runtimeStage(file = 'Dockerfile'): RuntimeStage {
  const text = fs.readFileSync(file, 'utf8').replace(/\\\n\s*/g, ' ');
  const image = text.match(/^ARG NODE_IMAGE=(\S+)$/m)?.[1];
  const stage = text.slice(text.lastIndexOf('\nFROM '));
  // The install up to its `&&` (what follows cleans the image's npm cache, not ours).
  const install = stage
    .match(/^RUN (npm ci [^&\n]+)/m)?.[1]
    ?.trim()
    .split(/\s+/);
  const env = stage.match(/^ENV (.+)$/m)?.[1];
  const healthcheck = stage.match(/^HEALTHCHECK .*CMD (\[.*\])$/m)?.[1];
  const cmd = stage.match(/^CMD (\[.*\])$/m)?.[1];
  if (!image || !install || !env || !healthcheck || !cmd)
    throw new Error(`${file}: runtime stage not understood`);
  return {
    image,
    install,
    env: Object.fromEntries(env.split(/\s+/).map((pair) => pair.split('=') as [string, string])),
    healthcheck: JSON.parse(healthcheck),
    cmd: JSON.parse(cmd),
  };
}
