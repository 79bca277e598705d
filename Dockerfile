# syntax=docker/dockerfile:1
# The User Group Service, installed exactly as docs/deployment.md ("Production") says, which
# test/production/production-install.test.ts runs in CI. CI builds and runs this image too
# (.ci/container, test/containers/image.test.ts; docs/deployment.md, "Containers").

# --- build: every dependency, the build (npm ci's prepare step), then only production packages
FROM node:24-bookworm-slim AS build
WORKDIR /app
# NODE_ENV must not be production here: npm would leave out the build tools.
ENV NODE_ENV=development
COPY . .
RUN npm ci && npm prune --omit=dev

# --- run: the built service and its production packages, as an unprivileged user
FROM node:24-bookworm-slim
# The release this image is: package.json's version, written here by `npm run release`
# (test/containers.test.ts holds them equal; docs/operations.md, "Releases").
LABEL org.opencontainers.image.title="User Group Service" \
      org.opencontainers.image.version="0.3.0-dev" \
      org.opencontainers.image.licenses="MIT"
WORKDIR /app
# The key file of this SQLite database is /app/data/secret.key, beside it; with a PostgreSQL
# DATABASE_URL no key file is read unless UGS_KEY_FILE names one (docs/security.md, "Secret keys").
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATABASE_URL=sqlite:/app/data/ugs.sqlite
COPY --from=build /app/package.json /app/LICENSE ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/bin ./bin
COPY --from=build /app/static ./static
COPY --from=build /app/console/dist ./console/dist
# The workspace link node_modules/@ugs/client points here (the console's client, built).
COPY --from=build /app/packages/client/package.json ./packages/client/package.json
COPY --from=build /app/packages/client/dist ./packages/client/dist
# SQLite's file and the key file live in /app/data: mount a volume there (or use PostgreSQL
# and UGS_SECRET_KEY, and keep the container stateless). The command-line tool is `ugs` on the
# PATH (docker exec <container> ugs …), with the image's DATABASE_URL: `npx ugs` would install
# this directory into npx's cache first, which needs the build tools the image leaves out.
RUN mkdir -p /app/data && chown node:node /app/data \
 && ln -s /app/bin/ugs.js /usr/local/bin/ugs
USER node
VOLUME ["/app/data"]
EXPOSE 3000
# Liveness only (docs/operations.md, "Probes"); readiness is GET /readyz.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM drains in-flight requests for up to UGS_SHUTDOWN_TIMEOUT_MS (10 s): stop with a
# longer grace period (docker stop -t 15).
STOPSIGNAL SIGTERM
CMD ["node", "dist/server.js"]
