-- The prelude: runs once per runtime, before the script and before `debug` is
-- removed (see sandbox.py). Its arguments are the Python callbacks; they stay in
-- its upvalues, out of the script's reach (no `debug.getupvalue`). Each callback
-- returns `ok, value`; `pcall` turns a Python exception raised outside our code
-- (e.g. lupa failing to decode a non-UTF-8 argument) into a message via `fault`.
local check, fault, raw_add, raw_remove, raw_status, raw_list, raw_env, raw_print,
      raw_load, raw_on, raw_call, raw_async, raw_profile, raw_policy, raw_defaults,
      count = ...
local sethook, getinfo = debug.sethook, debug.getinfo
local error, pcall, rawget, tostring, type = error, pcall, rawget, tostring, type
local select, pairs = select, pairs
local raw_setmetatable = setmetatable
local co_create, co_resume = coroutine.create, coroutine.resume
local pack, unpack, concat = table.pack, table.unpack, table.concat
local utf8len, gsub = utf8.len, string.gsub

-- Sticky time budget: once past the deadline the hook fires on every instruction,
-- so an error swallowed by a pcall is raised again right outside it.
local expired = false
local function hook()
  if check() then  -- sticky on the Python side until rearmed
    expired = true
    sethook(hook, "", 1)
    -- Blame the script's line, not a line of this prelude.
    local level = 2
    while true do
      local info = getinfo(level, "S")
      if info == nil then level = 2 break end
      if info.source ~= "=prelude" and info.what ~= "C" then break end
      level = level + 1
    end
    error("script exceeded its time budget", level)
  end
end

-- Hooks are per coroutine: give every coroutine the script creates its own.
local function create(f)
  if type(f) ~= "function" then
    error("bad argument #1 to 'create' (function expected)", 2)
  end
  local co = co_create(f)
  sethook(co, hook, "", expired and 1 or count)
  return co
end
coroutine.create = create
coroutine.wrap = function(f)
  if type(f) ~= "function" then
    error("bad argument #1 to 'wrap' (function expected)", 2)
  end
  local co = create(f)
  return function(...)
    local r = pack(co_resume(co, ...))
    if not r[1] then error(r[2], 0) end
    return unpack(r, 2, r.n)
  end
end

-- Lua runs an error handler with hooks disabled when the error came from a hook,
-- and coroutine.close runs __close handlers on a thread a hook error killed with
-- hooks still disabled; past the deadline, skip both.
local raw_xpcall, co_close = xpcall, coroutine.close
xpcall = function(f, handler, ...)
  return raw_xpcall(f, function(e)
    if expired then return e end
    return handler(e)
  end, ...)
end
local function stop_if_expired()
  if expired then error("script exceeded its time budget", 3) end
end
coroutine.close = function(co)
  stop_if_expired()
  return co_close(co)
end
coroutine.resume = function(co, ...)
  local r = pack(co_resume(co, ...))
  stop_if_expired()
  return unpack(r, 1, r.n)
end

-- A built-in string function runs without the count hook: one call on a large
-- string may take 0.1 s and a loop of them only a few instructions. Each checks
-- the budget first; its own errors keep its name and blame the caller's line.
local function timed(name, raw)
  local label = "'" .. name .. "'"
  return function(...)
    if check() then hook() end
    local r = pack(pcall(raw, ...))
    if r[1] then return unpack(r, 2, r.n) end
    local e = r[2]
    if expired or type(e) ~= "string" then error(e, 0) end
    local _, placed = gsub(e, "^[^\n]-:%d+: ", "")
    if placed > 0 then error(e, 0) end  -- from a Lua function it called
    error((gsub(e, "'%?'", label, 1)), 2)
  end
end
local timed_names = {"rep", "gsub", "find", "match", "gmatch", "format"}
for i = 1, #timed_names do
  local name = timed_names[i]
  string[name] = timed(name, string[name])
end

-- Finalizers run with hooks disabled, so a loop in __gc could not be stopped.
setmetatable = function(t, mt)
  if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
    error("setmetatable: __gc metamethods are not allowed", 2)
  end
  return raw_setmetatable(t, mt)
end

local function invoke(label, raw, ...)
  local pok, ok, res = pcall(raw, ...)
  if not pok then return false, fault(label, ok) end
  return ok, res
end

local function api(label, raw)
  return function(...)
    local ok, res = invoke(label, raw, ...)
    if not ok then error(res, 2) end
    return res
  end
end

-- The first Lua frame above the shim: where mcp_add was written.
local function caller()
  local level = 3
  while true do
    local info = getinfo(level, "Sl")
    if info == nil then return nil, nil end
    if info.currentline > 0 then return info.short_src, info.currentline end
    level = level + 1
  end
end

mcp_add = function(...)
  local src, line = caller()
  local ok, res = invoke("mcp_add", raw_add, src, line, ...)
  if not ok then error(res, 2) end
  return res
end
mcp_profile = function(...)
  local src, line = caller()
  local ok, res = invoke("mcp_profile", raw_profile, src, line, ...)
  if not ok then error(res, 2) end
  return res
end
mcp_policy = function(...)
  local src, line = caller()
  local ok, res = invoke("mcp_policy", raw_policy, src, line, ...)
  if not ok then error(res, 2) end
  return res
end
mcp_defaults = function(...)
  local src, line = caller()
  local ok, res = invoke("mcp_defaults", raw_defaults, src, line, ...)
  if not ok then error(res, 2) end
  return res
end
mcp_remove = api("mcp_remove", raw_remove)
mcp_status = api("mcp_status", raw_status)
mcp_list = api("mcp_list", raw_list)
mcp_on = api("mcp_on", raw_on)
-- mcp_call(server, tool, args, fn), mcp_read(server, uri, fn) and
-- mcp_prompt(server, name, args, fn): one Python entry, told which and how many
-- arguments were given (so a wrong count gets the usage line, not a nil error).
local function requester(label, op)
  return function(...)
    local ok, res = invoke(label, raw_call, op, select("#", ...), ...)
    if not ok then error(res, 2) end
    return res
  end
end
mcp_call = requester("mcp_call", "call")
mcp_read = requester("mcp_read", "read")
mcp_prompt = requester("mcp_prompt", "prompt")

-- Coroutine style: mcp_async(fn) runs fn as a job in which
-- `local result, err = mcp_await(server, tool, args)` waits for a call without
-- blocking anything. The daemon drives jobs through `step` (returned below).
local jobs, awaiting, next_job = {}, {}, 0
local co_running, co_status = coroutine.running, coroutine.status
local co_yield = coroutine.yield
mcp_async = function(fn)
  if type(fn) ~= "function" then
    error("mcp_async(fn): fn must be a function, got " .. type(fn), 2)
  end
  next_job = next_job + 1
  jobs[next_job] = create(fn)
  local ok, res = invoke("mcp_async", raw_async, next_job)
  if not ok then error(res, 2) end
  return next_job
end
mcp_await = function(server, tool, args)
  local co, main = co_running()
  if main then
    error("mcp_await: only inside mcp_async(function() ... end)", 2)
  end
  local known = false
  for _, job in pairs(jobs) do if job == co then known = true break end end
  if not known then
    error("mcp_await: only inside mcp_async(function() ... end)", 2)
  end
  awaiting[co] = {server, tool, args, "call"}
  return co_yield()
end
local function awaiter(op, name)
  return function(server, target, args)
    local co, main = co_running()
    local known = false
    if not main then
      for _, job in pairs(jobs) do if job == co then known = true break end end
    end
    if not known then
      error(name .. ": only inside mcp_async(function() ... end)", 2)
    end
    awaiting[co] = {server, target, args or {}, op}
    return co_yield()
  end
end
mcp_await_read = awaiter("read", "mcp_await_read")
mcp_await_prompt = awaiter("prompt", "mcp_await_prompt")
local function step(id, ...)
  local co = jobs[id]
  if co == nil then return false, "no such job", "dead" end
  local ok, err = co_resume(co, ...)
  local status = co_status(co)
  local request = awaiting[co]
  awaiting[co] = nil
  if status == "dead" then jobs[id] = nil end
  if not ok then jobs[id] = nil return false, err, "dead" end
  if status == "suspended" and request == nil then
    jobs[id] = nil
    return false, "mcp_async: the job yielded without mcp_await; "
      .. "only mcp_await may wait", "dead"
  end
  if request ~= nil then
    return true, request[1], request[2], request[3], request[4]
  end
  return true, nil
end

env = function(name, ...)
  local ok, res = invoke("env", raw_env, name)
  if not ok then error(res, 2) end
  if res == nil then return (...) end
  return res
end

print = function(...)
  local args = pack(...)
  for i = 1, args.n do
    local s = tostring(args[i])
    if not utf8len(s) then s = gsub(s, "[\128-\255]", "?") end
    args[i] = s
  end
  local ok, res = invoke("print", raw_print, concat(args, "\t", 1, args.n))
  if not ok then error(res, 2) end
end

-- Like require, but only for <config_dir>/<name>.lua, cached for this run.
local loaded, loading = {}, {}
mcp_load = function(name)
  local cached = loaded[name]
  if cached ~= nil then return cached end
  if loading[name] then
    error("mcp_load('" .. name .. "'): circular load; " .. name
          .. ".lua is still loading", 2)
  end
  local ok, chunk = invoke("mcp_load", raw_load, name)
  if not ok then error(chunk, 2) end
  loading[name] = true
  local cok, result = pcall(chunk, name)
  loading[name] = nil
  if not cok then error(result, 0) end
  if result == nil then result = true end
  loaded[name] = result
  return result
end
require = mcp_load

sethook(hook, "", count)
-- The runner (drops the script's return values), and `rearm`, which gives a
-- callback run later (mcp_on, mcp_call) a fresh budget after a runaway one.
return function(chunk) chunk() end, function()
  expired = false
  sethook(hook, "", count)
end, step
