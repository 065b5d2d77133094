#!/usr/bin/env bash
# Cross-checks `npm run bench` with its own harness: a different ceiling (a bare node:http server
# written here, not bench/ceiling.mjs) and the load generator's own command line — autocannon's
# CLI by default (the benchmark itself uses wrk when installed), or wrk. Read one, list limit=20
# and create, 50 connections, server on core 0 and the load generator on core 1, rounds
# alternating which target goes first. Prints each round and the median of the per-round ratios.
#   bash bench/cross-check.sh [rounds=5] [seconds=3] [autocannon|wrk]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
SECS=${2:-3}
GEN=${3:-autocannon}
case $GEN in
  wrk) command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 2; } ;;
  autocannon) ;;
  *) echo "load generator: autocannon or wrk" >&2; exit 2 ;;
esac
TMP=$(mktemp -d)
PIDS=()
cleanup() { kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT

npm run build --silent
npx tsx -e "import('./bench/seed.ts').then(async (m) => console.log(JSON.stringify(await m.seed('sqlite:$TMP/store.db', 100000))))" >"$TMP/seed.json"
TOKEN=$(node -e "console.log(JSON.parse(require('fs').readFileSync('$TMP/seed.json', 'utf8')).token)")
node -e "const s = JSON.parse(require('fs').readFileSync('$TMP/seed.json', 'utf8')); console.log('ids = {' + s.callerIds.slice(0, 256).join(',') + '}')" >"$TMP/ids.lua"

cat >"$TMP/ceiling.mjs" <<'JS'
import http from 'node:http';
const one = Buffer.from('{"name":"Monstera","tag":"indoor"}');
const page = Buffer.from(JSON.stringify(Array.from({ length: 20 }, (_, i) => ({ name: `p${i}`, tag: 'x' }))));
http.createServer((req, res) => {
  res.setHeader('content-type', 'application/json');
  // end(body) with no header sent yet sets Content-Length; a request without a token is refused.
  if (!req.headers.authorization?.startsWith('Bearer ')) { res.statusCode = 401; res.end('{}'); }
  else if (req.method === 'POST') {
    req.resume();
    req.on('end', () => { res.statusCode = 201; res.setHeader('location', '/plants/1'); res.end(one); });
  } else res.end(req.url.startsWith('/plants/') ? one : page);
}).listen(Number(process.argv[2]), '127.0.0.1');
JS
cat >"$TMP/read.lua" <<LUA
dofile('$TMP/ids.lua')
local i = 0
wrk.headers['Authorization'] = 'Bearer $TOKEN'
request = function() i = i + 1; return wrk.format('GET', '/plants/' .. ids[(i % #ids) + 1]) end
LUA
cat >"$TMP/list.lua" <<LUA
wrk.headers['Authorization'] = 'Bearer $TOKEN'
wrk.path = '/plants?limit=20'
LUA
cat >"$TMP/create.lua" <<LUA
wrk.method = 'POST'
wrk.path = '/plants'
wrk.headers['Authorization'] = 'Bearer $TOKEN'
wrk.headers['Content-Type'] = 'application/json'
wrk.body = '{"name":"Cross-check fern","tag":"wrk"}'
LUA

PS=7461
CEIL=7462
taskset -c 0 node dist/cli/main.js serve --port $PS --database "sqlite:$TMP/store.db" --log-level warn \
  --rate-limit 0 --auth-failure-limit 0 &
PIDS+=($!)
taskset -c 0 node "$TMP/ceiling.mjs" $CEIL &
PIDS+=($!)
for port in $PS $CEIL; do
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/plants" && break; sleep 0.1; done
done

# One run: prints "req/s p99 non-2xx". read one reads a single plant with autocannon (its CLI
# sends one fixed request), a rotation of 256 with wrk.
FIRST_ID=$(node -e "console.log(JSON.parse(require('fs').readFileSync('$TMP/seed.json', 'utf8')).callerIds[0])")
run() {
  if [ "$GEN" = wrk ]; then
    taskset -c 1 wrk -t1 -c50 -d"$3" --latency -s "$TMP/$2.lua" "http://127.0.0.1:$1" |
      awk '/Requests\/sec/ {r = $2} / 99%/ {p = $2} /Non-2xx/ {n = $NF} END {print r, p, n + 0}'
    return
  fi
  local args=(-c 50 -d "$3" -j -H "authorization=Bearer $TOKEN")
  case $2 in
    read) args+=("http://127.0.0.1:$1/plants/$FIRST_ID") ;;
    list) args+=("http://127.0.0.1:$1/plants?limit=20") ;;
    create) args+=(-m POST -H "content-type=application/json" -b '{"name":"Cross-check fern","tag":"ac"}' "http://127.0.0.1:$1/plants") ;;
  esac
  taskset -c 1 node_modules/.bin/autocannon "${args[@]}" 2>/dev/null |
    node -e "const r = JSON.parse(require('fs').readFileSync(0, 'utf8')); console.log((r.requests.total / r.duration).toFixed(0), r.latency.p99 + 'ms', r.non2xx)"
}
for op in read list create; do run $PS $op 1 >/dev/null; run $CEIL $op 1 >/dev/null; done

: >"$TMP/ratios"
for r in $(seq "$ROUNDS"); do
  for op in read list create; do
    if ((r % 2)); then c=$(run $CEIL $op "$SECS"); p=$(run $PS $op "$SECS"); else p=$(run $PS $op "$SECS"); c=$(run $CEIL $op "$SECS"); fi
    read -r crps cp99 cbad <<<"$c"
    read -r prps pp99 pbad <<<"$p"
    ratio=$(awk -v a="$prps" -v b="$crps" 'BEGIN {printf "%.3f", a / b}')
    echo "$GEN round $r $op: ceiling $crps req/s p99 $cp99 (non-2xx $cbad) | plantstore $prps req/s p99 $pp99 (non-2xx $pbad) | ratio $ratio"
    echo "$op $ratio" >>"$TMP/ratios"
  done
done
for op in read list create; do
  grep "^$op " "$TMP/ratios" | awk '{print $2}' | sort -n |
    awk -v op="$op" '{a[NR] = $1} END {m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%s: median of per-round ratios %.2f (%s to %s)\n", op, m, a[1], a[NR]}'
done
