# The image users run (CONTRACT.md 14.2; docs/container.md says how to build and run it).
#   podman build --format docker -t plantstore .    (docker build -t plantstore .)
# BASE names another Node 24 image (a mirror's copy, a pinned digest); it needs /bin/sh, npm and
# apt-get (Debian bookworm or later: the extension stage installs gcc from it).
ARG BASE=node:24-bookworm-slim

# Every dependency, as the lockfile says. Install scripts are skipped: better-sqlite3 ships
# prebuilt binaries for every platform and has none; the one the build would otherwise run is the
# `node` devDependency's download of the project's Node 24 for `npm test`, and here the image's
# own Node runs everything, so that package's dangling bin link goes too. The one file compiled is
# the store's SQLite extension, in a stage of its own below; no compiler reaches the image.
FROM ${BASE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# npm's settings and CA certificates, when the build needs them to reach the registry (a proxy
# that re-signs TLS, a private mirror), are build secrets: mounted into this step only, never in a
# layer. `--secret id=npmrc,src=$HOME/.npmrc --secret id=npm_ca,src=/path/to/ca.pem`; both optional.
RUN --mount=type=secret,id=npmrc,target=/root/.npmrc \
    --mount=type=secret,id=npm_ca,target=/run/secrets/npm_ca \
    --mount=type=cache,target=/root/.npm,sharing=locked \
    if [ -s /run/secrets/npm_ca ]; then export npm_config_cafile=/run/secrets/npm_ca; fi \
    && npm ci --ignore-scripts --no-audit --no-fund --loglevel=warn \
    && rm -f node_modules/.bin/node

# dist/: the compiled service, the client and the console. The default BASE has no C compiler, so
# the build leaves the SQLite extension out here (it says so); the next stage makes it.
FROM deps AS build
COPY . .
RUN npm run build

# The SQLite extension the store's connections load (src/store/sqlite/stable-plans.c: searches on
# SQLite a third cheaper, docs/search.md), compiled with Debian's gcc against the sqlite3ext.h of
# the SQLite better-sqlite3 ships, as `npm run build` does where there is a compiler.
FROM ${BASE} AS extension
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null \
    && rm -rf /var/lib/apt/lists/*
COPY --from=deps /app/node_modules/better-sqlite3/deps/sqlite3/sqlite3.h /app/node_modules/better-sqlite3/deps/sqlite3/sqlite3ext.h /ext/
COPY src/store/sqlite/stable-plans.c /ext/
RUN cc -O2 -fPIC -shared -I /ext /ext/stable-plans.c -o /ext/plantstore.so

# Production dependencies only (no network: npm removes the rest, leaving empty scope folders).
# better-sqlite3's C sources and the other platforms' binaries go too. Rebuilt only when the lockfile changes.
FROM deps AS production
RUN npm prune --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=warn \
    && find node_modules -mindepth 1 -maxdepth 1 -type d -empty -delete \
    && cd node_modules/better-sqlite3 \
    && rm -rf deps src \
    && arch=$(node -p process.arch) \
    && find prebuilds -type f ! -name "linux-$arch.node" ! -name "linuxmusl-$arch.node" -delete

FROM ${BASE}
# The service's whole filesystem footprint is /data: the SQLite store (its -wal and -shm beside
# it), backups/ (`backup` and BACKUP_DIR), and TMPDIR, where export answers spool (each file
# unlinked as soon as it is open) and SQLite puts its temporary files. So the root filesystem can
# be read-only with no tmpfs at all. HOST is 0.0.0.0 in here only; outside it stays 127.0.0.1.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATABASE_URL=sqlite:/data/plantstore.db \
    TMPDIR=/data \
    PATH=/app/bin:$PATH
WORKDIR /app
COPY --from=production /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=extension /ext/plantstore.so ./dist/store/sqlite/plantstore.so
COPY package.json ./
COPY bin ./bin
# uid 1000 is the official Node images' `node` user; numeric, so a base without that passwd entry
# runs it too. A new named volume takes /data's owner from the image.
RUN mkdir -p /data && chown 1000:1000 /data
USER 1000:1000
VOLUME ["/data"]
EXPOSE 3000
# Node's own fetch (the image has no curl); HEALTHCHECK needs `podman build --format docker`.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# serve drains on SIGTERM (/readyz 503 at once, in-flight requests finish) and exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["plantstore"]
CMD ["serve"]
