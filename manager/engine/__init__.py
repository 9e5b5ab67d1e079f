"""The engine: keeps the declared connections alive.

- `bus`: the broadcast event bus (a slow subscriber never slows a publisher).
- `tracing`: the seam for spans that must be current while work runs.
- `connection`: one connection's record (spec, state, session, lists, the
  transport's hooks); `supervisor`: its task, the attempt → watch → retry loop.
- `manager`: the desired set, reconciliation, status and tool calls; `calls`:
  holding a call for a reconnecting server, and its failure as the caller's
  error; `live`: telling a session its roots changed, when a reload applies
  without a reconnect (`core.spec.applies_live` decides that).
- `pins`: pinned tool, prompt and template definitions (trust on first
  use), what changed since, approvals.
- `lists`: what on-demand servers listed, kept between their sessions.
- `results`: whole tool results that `max_output` cut, kept an hour, bounded.
- `policy`: the call policy at work (`Policy.admit` before a call is sent:
  `mcp_policy` rules, asks held for the user's answer through the control
  socket or the HUD, `approvals.json` for answers kept always).
- `calllog`: one row per tool call in `calls.sqlite3`, written off the call
  path, bounded by age and rows.
- `launches`: launch locks as status shows them (`launch_text`) and
  `update` changes them (`offer`, `take`).
- `vault`: secret references (`${keyring:}`, `${cmd:}`, `${op://}`) read
  before each connection attempt.
- `logins`, `status`, `output`: OAuth logins in flight, status snapshots,
  bounded captured stderr and log text.

Of the transport the engine knows its seam (`transport.base`), the real
transport's facade (`transport.mcp_transport`) and the OAuth facade
(`transport.oauth`), nothing concrete.
"""
