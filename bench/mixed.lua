-- The mixed workload (bench/mixed.ts): every request is drawn from a pool of real requests by
-- class weight — lists of first pages (random limit and tag), deep pages (paths taken from real
-- Link headers), reads of one plant, creates — each with its user's token.
--   MIXED_POOL  the pool: one request per line, "class<TAB>method<TAB>path<TAB>token<TAB>body"
--   MIXED_MIX   weights, "list:36,deep:24,read:25,create:15"
-- Latency per class: each request carries X-Request-Id "<class>-<send time in µs>", which the
-- service echoes, so response() knows which class it answers and when it was sent (a monotonic
-- clock through LuaJIT's FFI). Prints one line: MIXED {"requests":…,"classes":{…}}.
local ffi = require('ffi')
ffi.cdef[[
  typedef struct { long tv_sec; long tv_nsec; } mixed_timespec;
  int clock_gettime(int clk, mixed_timespec *tp);
]]
local ts = ffi.new('mixed_timespec')
local function now_us()
  ffi.C.clock_gettime(1, ts)
  return tonumber(ts.tv_sec) * 1000000 + math.floor(tonumber(ts.tv_nsec) / 1000)
end

local byClass = {}
for line in io.lines(os.getenv('MIXED_POOL')) do
  local class, method, path, token, body = line:match('^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t?(.*)$')
  byClass[class] = byClass[class] or {}
  local r = { method = method, path = path, token = token, body = body ~= '' and body or nil }
  table.insert(byClass[class], r)
end

-- Cumulative weights.
local classes, cumulative, total = {}, {}, 0
for name, w in (os.getenv('MIXED_MIX') or ''):gmatch('(%w+):(%d+)') do
  if byClass[name] then
    total = total + tonumber(w)
    classes[#classes + 1] = name
    cumulative[#cumulative + 1] = total
  end
end

function init(args)
  math.randomseed(now_us())
end

-- Flat globals only: wrk copies a thread's globals to the main state in done(), and nested tables
-- crashed it. One array of latencies (µs) per class, and status counts by "class:status".
local CLASSES = { 'list', 'deep', 'read', 'create' }
for _, c in ipairs(CLASSES) do _G['lat_' .. c] = {} end
statuses = {}

function request()
  local x = math.random() * total
  local k = 1
  while cumulative[k] < x do k = k + 1 end
  local class = classes[k]
  local list = byClass[class]
  local r = list[math.random(#list)]
  local headers = { ['Authorization'] = 'Bearer ' .. r.token, ['X-Request-Id'] = class .. '-' .. now_us() }
  if r.body then headers['Content-Type'] = 'application/json' end
  return wrk.format(r.method, r.path, headers, r.body)
end

function response(status, hdrs, body)
  local id = hdrs['x-request-id'] or hdrs['X-Request-Id']
  if not id then return end
  local class, sent = id:match('^(%a+)-(%d+)$')
  if not class then return end
  local l = _G['lat_' .. class]
  if not l then return end
  l[#l + 1] = now_us() - tonumber(sent)
  local key = class .. ':' .. status
  statuses[key] = (statuses[key] or 0) + 1
end

local threads = {}
function setup(thread)
  threads[#threads + 1] = thread
end

local function percentile(sorted, p)
  if #sorted == 0 then return 0 end
  return sorted[math.max(1, math.ceil(#sorted * p / 100))]
end

function done(summary, latency, requests)
  local all, counts = {}, {}
  for _, t in ipairs(threads) do
    for _, class in ipairs(CLASSES) do
      local l = t:get('lat_' .. class) or {}
      if #l > 0 then
        all[class] = all[class] or {}
        for _, v in ipairs(l) do table.insert(all[class], v) end
      end
    end
    for key, n in pairs(t:get('statuses') or {}) do counts[key] = (counts[key] or 0) + n end
  end
  local parts = {}
  for class, l in pairs(all) do
    table.sort(l)
    parts[#parts + 1] = string.format('"%s":{"n":%d,"p50_us":%d,"p99_us":%d,"max_us":%d}', class, #l,
      percentile(l, 50), percentile(l, 99), l[#l])
  end
  local st = {}
  for key, n in pairs(counts) do st[#st + 1] = string.format('"%s":%d', key, n) end
  local e = summary.errors
  io.write(string.format(
    'MIXED {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"non2xx":%d,"errors":%d,"classes":{%s},"statuses":{%s}}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), e.status,
    e.connect + e.read + e.write + e.timeout, table.concat(parts, ','), table.concat(st, ',')))
end
