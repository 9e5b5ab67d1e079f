-- startup.lua: the MCP connections mcp-manager keeps alive.
--
-- Each mcp_add(name, endpoint, options) declares one connection. The daemon
-- connects in the background and reconnects forever (0.1 s, doubling, at most
-- 3 s apart). Check this file without running it: `mcp-manager check startup.lua`.
-- Full reference: README.md, "startup.lua reference".
--
-- This bundled file needs nothing outside the project: it runs the demo server
-- that ships with mcp-manager (python -m manager.demo_server).

local python = env("MCP_MANAGER_PYTHON")   -- the daemon's own Python by default

-- A healthy server over stdio: reaches `connected` and stays there.
mcp_add("demo", {
  command = python,
  args = {"-m", "manager.demo_server"},
})

-- The same server, told to exit every 30 seconds: watch it come back by itself
-- (`mcp-manager events`, or the status table).
mcp_add("flaky", {
  command = python,
  args = {"-m", "manager.demo_server", "--exit-after", "30"},
})

-- Nothing listens on port 9: this one shows the retry schedule climbing to the
-- 3 s cap, with the error in `mcp-manager status`. Start any streamable HTTP MCP
-- server there (or change the URL) and it connects on the next try.
mcp_add("offline", "http://127.0.0.1:9/mcp", {connect_timeout = 5})

-- More forms (uncomment to use):
-- mcp_add("remote", "https://mcp.example.com/mcp", {
--   headers = {Authorization = "Bearer ${env:EXAMPLE_TOKEN}"},   -- read at connect time, never logged
-- })
-- mcp_add("legacy", {url = "http://127.0.0.1:8001/sse", transport = "sse"})
-- mcp_add("files", {command = "npx", args = {"-y", "@modelcontextprotocol/server-filesystem", "/tmp"}})
