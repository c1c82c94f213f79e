# syntax=docker/dockerfile:1
# The queen-ingress image (used by deploy/helm). No Docker engine or registry is
# reachable where this repository is developed, so the image is not built by
# `make test`; test/unit/dockerfile.test.ts checks this file instead (pinned
# base, numeric USER, HEALTHCHECK, OCI labels, what the final stage copies).
#
#   docker build -t queen-ingress:0.1.0 \
#     --build-arg QUEEN_BUILD_COMMIT="$(git rev-parse HEAD)" --build-arg CREATED="$(date -u +%FT%TZ)" .
#
# The base is pinned to a patch version. To pin its exact bytes too, resolve
# the digest once and build with it (and commit that line):
#   docker buildx imagetools inspect node:24.22.3-bookworm-slim   # "Digest: sha256:…"
#   docker build --build-arg NODE_IMAGE=node:24.22.3-bookworm-slim@sha256:<digest> .
ARG NODE_IMAGE=node:24.22.3-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
# Only src/ is in the build context's copy, so tsc emits dist/src alone.
RUN npx tsc -p tsconfig.json && npm prune --omit=dev --no-audit --no-fund

FROM ${NODE_IMAGE}
ARG NODE_IMAGE
ARG VERSION=0.1.0
# The commit the service reports as queen_build_info{commit} (the image has no
# .git for src/telemetry/buildInfo.ts to ask); also the revision label.
ARG QUEEN_BUILD_COMMIT=unknown
ARG REVISION=${QUEEN_BUILD_COMMIT}
ARG CREATED=unknown
LABEL org.opencontainers.image.title="queen-ingress" \
      org.opencontainers.image.description="Kafka and HTTP ingress into a partitioned PostgreSQL message log with exact deduplication" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="UNLICENSED" \
      org.opencontainers.image.base.name="${NODE_IMAGE}"
WORKDIR /app
ENV NODE_ENV=production
ENV QUEEN_BUILD_COMMIT=${QUEEN_BUILD_COMMIT}
# Owned by root and not writable by the service's user: the Helm chart runs it
# with a read-only root filesystem (and a writable emptyDir on /tmp).
COPY package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
COPY sql ./sql
# Numeric, so Kubernetes' runAsNonRoot can verify it (1000 is the base image's "node").
USER 1000:1000
EXPOSE 6632
# For plain Docker; Kubernetes uses the chart's probes instead. Liveness only:
# a PostgreSQL outage must not mark the container unhealthy.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.QUEEN_HTTP_PORT || 6632) + '/health/live').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
STOPSIGNAL SIGTERM
# 32 MB V8 semi-spaces: a push's short-lived objects die young (measured in
# docs/operations.md, "Node's young generation"). Override with NODE_OPTIONS.
ENV NODE_OPTIONS="--max-semi-space-size=32"
CMD ["node", "dist/src/main.js"]
