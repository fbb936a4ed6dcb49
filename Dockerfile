# syntax=docker/dockerfile:1
# One Dockerfile, two images: `--target operator` and `--target agent`.
# Build stage: the esbuild bundles (npm run build). Run stage: distroless Node 24 (no shell, no npm),
# only the bundle of that program. Pin the base images by digest in your registry mirror for production.

FROM node:24.21.0-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json .npmrc ./
# --ignore-scripts: the image already has Node 24, so the pinned `node` package's download is not needed.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY api ./api
COPY lib ./lib
COPY agent ./agent
COPY controller ./controller
COPY plugin ./plugin
COPY scripts/build.ts ./scripts/build.ts
COPY scripts/lib ./scripts/lib
RUN node scripts/build.ts

FROM gcr.io/distroless/nodejs24-debian12:nonroot AS operator
COPY --from=build /src/dist/controller/ /app/
COPY LICENSE /app/LICENSE
USER 65532:65532
EXPOSE 8080
# The V8 heap is sized from the container's memory limit (cgroup v1 or v2): half of it, the rest for
# everything else of the process (docs/adr/0023).
ENTRYPOINT ["/nodejs/bin/node", "--max-old-space-size-percentage=50", "/app/node-disks-operator.mjs"]

# The agent runs as UID 0 with no capabilities (see kustomize/agent/daemonset.yaml): it must write
# marker files in the host's root-owned disk dir.
FROM gcr.io/distroless/nodejs24-debian12 AS agent
COPY --from=build /src/dist/agent/ /app/
COPY LICENSE /app/LICENSE
EXPOSE 8080
ENTRYPOINT ["/nodejs/bin/node", "/app/node-disks-agent.mjs"]
