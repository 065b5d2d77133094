#!/bin/bash
# A/B of the SQLite extension (src/store/sqlite/stable-plans.c; docs/search.md): searches on a copy
# of a store kept by `npx tsx bench/size.ts --size N --engine sqlite --keep`, served by this tree's
# dist/ with the extension and without it (its file moved aside for the run), in alternated runs.
# The server on core 0, wrk on core 1, 50 connections, the caller in 4 gardens (u5000), `mon` and
# `mon del`; each line: variant, query, req/s, the server's CPU µs a request (utime + stime from
# /proc over the run), p50, p99.
#   bash bench/search-extension-ab.sh 100000 [rounds=2] [seconds=8]
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=$1
ROUNDS=${2:-2}
SECONDS_PER_RUN=${3:-8}
SO=dist/store/sqlite/plantstore.so
STORE=.tmp/size-$SIZE-v1.db
[ -f "$SO" ] || { echo "no $SO: npm run build with a C compiler first" >&2; exit 1; }
[ -f "$STORE" ] || { echo "no $STORE: npx tsx bench/size.ts --size $SIZE --engine sqlite --keep first" >&2; exit 1; }
KEEP=$(mktemp -d)
cp "$SO" "$KEEP/plantstore.so"
trap 'cp "$KEEP/plantstore.so" "$SO"; rm -rf "$KEEP"' EXIT
TOKEN=$(node -e "console.log(JSON.parse(require('fs').readFileSync('.tmp/size-$SIZE-v1.json','utf8')).layout.tokens[5000])")
PORT=${PORT:-3977}
TCK=$(getconf CLK_TCK)

run() { # variant query
  rm -f "$KEEP"/ab.db*
  cp "$STORE" "$KEEP/ab.db"
  if [ -f "$STORE-wal" ]; then cp "$STORE-wal" "$KEEP/ab.db-wal"; fi
  if [ "$1" = ext ]; then cp "$KEEP/plantstore.so" "$SO"; else rm -f "$SO"; fi
  taskset -c 0 bin/plantstore serve --port "$PORT" --database "sqlite:$KEEP/ab.db" --log-level warn \
    --rate-limit 0 --auth-failure-limit 0 --list-cache 0 >"$KEEP/server.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.1; done
  local url="http://127.0.0.1:$PORT/plants?limit=20&q=$2"
  taskset -c 1 wrk -t1 -c50 -d2s -H "authorization: Bearer $TOKEN" "$url" >/dev/null
  local t0 t1 out
  t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  out=$(taskset -c 1 wrk -t1 -c50 -d"${SECONDS_PER_RUN}s" --latency -H "authorization: Bearer $TOKEN" "$url")
  t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  if echo "$out" | grep -q Non-2xx; then echo "$1 $2: answers other than 2xx" >&2; exit 1; fi
  local reqs
  reqs=$(echo "$out" | awk '/requests in/{print $1}')
  echo "$1 $2 $(echo "$out" | awk '/Requests\/sec/{print $2}') req/s, $(( (t1 - t0) * 1000000 / TCK / reqs )) µs/req," \
    "p50 $(echo "$out" | awk '$1=="50%"{print $2}'), p99 $(echo "$out" | awk '$1=="99%"{print $2}')"
}

for r in $(seq 1 "$ROUNDS"); do
  for q in mon mon%20del; do
    if [ $((r % 2)) = 1 ]; then run plain $q; run ext $q; else run ext $q; run plain $q; fi
  done
done
