"""The engine: keeps the declared connections alive.

- `bus`: the broadcast event bus (a slow subscriber never slows a publisher).
- `tracing`: the seam for spans that must be current while work runs.
- `connection`: one connection's record and its reconnect loop (`run`).
- `manager`: the desired set, reconciliation, status and tool calls; `calls`:
  holding a call for a reconnecting server, and its failure as the caller's
  error; `live`: the spec changes applied without a reconnect.
- `logins`, `status`, `output`: OAuth logins in flight, status snapshots,
  bounded captured stderr and log text.
"""
