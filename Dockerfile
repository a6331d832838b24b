# syntax=docker/dockerfile:1
# Node 24.21.0 on Debian trixie: the Node the project pins as its `node` devDependency (a test keeps
# the two equal). An exact tag, but not yet a digest: it was written where no registry could be
# reached. To pin the digest as well, run `docker buildx imagetools inspect node:24.21.0-trixie-slim`
# and append its `@sha256:...` here.
ARG NODE_IMAGE=node:24.21.0-trixie-slim

# Build stage: compile TypeScript to dist/, bundle the server into dist/baton.mjs and the dashboard
# into dist/ui/ (npm run build).
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY migrations ./migrations
COPY ui ./ui
COPY openapi ./openapi
COPY scripts ./scripts
RUN npm run build

# Runtime stage: production dependencies only (no embedded PostgreSQL: DATABASE_URL is required).
# test/process/production-layout.test.ts builds this same layout without Docker and runs it.
FROM ${NODE_IMAGE}
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --omit=optional --no-audit --no-fund --ignore-scripts && npm cache clean --force
COPY --from=build /app/dist ./dist
USER node
EXPOSE 8080
# Reads HOST and PORT as the server does, so it follows them when they are changed.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "dist/src/cli/healthcheck.js"]
# Refuse to start without a database: the image carries no embedded PostgreSQL.
CMD ["sh", "-c", "if [ -z \"$DATABASE_URL\" ]; then echo 'DATABASE_URL is required in the container' >&2; exit 2; fi; exec node dist/baton.mjs"]
