-- One wrk run for the benchmark, driven by bench/wrk.mjs through environment variables:
--   WRK_METHOD, WRK_PATH (may hold {id}), WRK_BODY, WRK_TOKEN, WRK_IF_MATCH (an If-Match header),
--   WRK_IDS        a file with one id per line: {id} cycles through them (reads) …
--   WRK_EACH_ONCE  … or, when "1", uses each exactly once and ends the run after the last answer
--                  (it writes WRK_DONE to stderr, and bench/wrk.mjs interrupts wrk)
--   WRK_RECORD     "1": remember the id of every 201 (Location header, or "id" in the body)
--   WRK_ROTATION   how many of the ids the reads' rotation holds (default 256; "all": every one)
--   WRK_START      where in the ids the rotation begins (default 0), so that consecutive runs can
--                  go on where the last one stopped instead of asking its paths again
-- At the end it prints one line: RESULT {"requests":…,"duration_us":…,…,"created":[…]}.

local method = os.getenv('WRK_METHOD') or 'GET'
local path = os.getenv('WRK_PATH') or '/'
local body = os.getenv('WRK_BODY')
if body == '' then body = nil end
local token = os.getenv('WRK_TOKEN') or ''
local idsFile = os.getenv('WRK_IDS')
local eachOnce = os.getenv('WRK_EACH_ONCE') == '1'
local record = os.getenv('WRK_RECORD') == '1'
local rotationSize = os.getenv('WRK_ROTATION') or '256'
local start = tonumber(os.getenv('WRK_START') or '0') or 0

local headers = {}
if body then headers['Content-Type'] = 'application/json' end
if token ~= '' then headers['Authorization'] = 'Bearer ' .. token end
local ifMatch = os.getenv('WRK_IF_MATCH') or ''
if ifMatch ~= '' then headers['If-Match'] = ifMatch end

local ids = {}
if idsFile and idsFile ~= '' then
  for line in io.lines(idsFile) do ids[#ids + 1] = line end
end

-- Requests built once (no per-request work in the load generator): the fixed request, or a
-- rotation of up to WRK_ROTATION paths for reads, from WRK_START on.
local rotation = {}
local sent, answered = 0, 0
created = {}

function init(args)
  if #ids == 0 then
    rotation[1] = wrk.format(method, path, headers, body)
  elseif not eachOnce then
    local n = rotationSize == 'all' and #ids or math.min(#ids, tonumber(rotationSize))
    for k = 1, n do
      local id = ids[(start + k - 1) % #ids + 1]
      rotation[k] = wrk.format(method, (path:gsub('{id}', function() return id end)), headers, body)
    end
  end
end

-- wrk calls request() once before the run to check the script and never sends that request,
-- so that first call takes no id.
local checked = false

function request()
  if eachOnce then
    if not checked then
      checked = true
      return wrk.format(method, (path:gsub('{id}', ids[1] or '0')), headers, body)
    end
    sent = sent + 1
    -- Every id is in flight or done: this connection stays idle until the run ends.
    if sent > #ids then return '' end
    return wrk.format(method, (path:gsub('{id}', ids[sent])), headers, body)
  end
  sent = sent + 1
  return rotation[(sent - 1) % #rotation + 1]
end

-- Defined only when needed: with a response() wrk parses every answer's headers and body.
if eachOnce or record then
  function response(status, hdrs, b)
    answered = answered + 1
    if record and status == 201 then
      local loc = hdrs['location'] or hdrs['Location']
      local id = loc and loc:match('/plants/(%d+)$') or (b and b:match('"id"%s*:%s*(%d+)'))
      if id then created[#created + 1] = id end
    end
    if eachOnce and answered == #ids then
      -- wrk's main thread sleeps for the whole duration; bench/wrk.mjs interrupts it on this line.
      wrk.thread:stop()
      io.stderr:write('WRK_DONE\n')
    end
  end
end

local threads = {}
function setup(thread)
  threads[#threads + 1] = thread
end

function done(summary, latency, requests)
  local ids_out = {}
  for _, t in ipairs(threads) do
    for _, id in ipairs(t:get('created') or {}) do ids_out[#ids_out + 1] = id end
  end
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"non2xx":%d,"errors":%d,"created":[%s]}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.status, e.connect + e.read + e.write + e.timeout, table.concat(ids_out, ',')))
end
