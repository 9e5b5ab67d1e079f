-- config/servers.lua: common MCP servers, one line each in startup.lua.
--
--   local servers = require("servers")          -- loads this file (config/ only)
--   servers.filesystem("files", "/home/me/projects")
--   servers.github("github")                      -- token from $GITHUB_TOKEN
--
-- Every function calls mcp_add and returns what it returns. The last argument
-- may be a table of options (connect_timeout, hold, backoff, enabled, ...), as
-- for mcp_add. Secrets are written as ${env:NAME}: they are read when connecting
-- and never shown in logs or status.

local M = {}

local function with_options(opts, extra)
  local out = {}
  for k, v in pairs(extra or {}) do out[k] = v end
  for k, v in pairs(opts or {}) do out[k] = v end
  return out
end

-- Split trailing options off a variable argument list: f(name, a, b, {opts}).
local function split(...)
  local args = table.pack(...)
  local last = args[args.n]
  if type(last) == "table" then
    args.n = args.n - 1
    return {table.unpack(args, 1, args.n)}, last
  end
  return {table.unpack(args, 1, args.n)}, nil
end

-- The demo server bundled with mcp-manager (needs nothing else).
function M.demo(name, opts)
  return mcp_add(name, {command = env("MCP_MANAGER_PYTHON"), args = {"-m", "manager.demo_server"}}, opts)
end

-- Reference servers from the MCP project, run with npx (Node.js).
function M.filesystem(name, ...)
  local dirs, opts = split(...)
  assert(#dirs > 0, "servers.filesystem(name, dir, ...): give at least one directory")
  local args = {"-y", "@modelcontextprotocol/server-filesystem"}
  for _, dir in ipairs(dirs) do args[#args + 1] = dir end
  return mcp_add(name, {command = "npx", args = args}, opts)
end

function M.memory(name, opts)
  return mcp_add(name, {command = "npx", args = {"-y", "@modelcontextprotocol/server-memory"}}, opts)
end

function M.everything(name, opts)
  return mcp_add(name, {command = "npx", args = {"-y", "@modelcontextprotocol/server-everything"}}, opts)
end

-- Python reference servers, run with uvx (uv).
function M.fetch(name, opts)
  return mcp_add(name, {command = "uvx", args = {"mcp-server-fetch"}}, opts)
end

function M.git(name, repository, opts)
  assert(type(repository) == "string", "servers.git(name, repository): give the repository path")
  return mcp_add(name, {command = "uvx", args = {"mcp-server-git", "--repository", repository}}, opts)
end

-- GitHub's hosted server; the token comes from $GITHUB_TOKEN at connect time.
function M.github(name, opts)
  return mcp_add(name, "https://api.githubcopilot.com/mcp/", with_options(opts, {
    headers = {Authorization = "Bearer ${env:GITHUB_TOKEN}"},
  }))
end

-- Any streamable HTTP server behind a bearer token kept in an environment variable.
function M.http_with_token(name, url, token_variable, opts)
  assert(type(token_variable) == "string", "servers.http_with_token(name, url, VARIABLE): name the variable")
  return mcp_add(name, url, with_options(opts, {
    headers = {Authorization = "Bearer ${env:" .. token_variable .. "}"},
  }))
end

return M
