"""The engine: keeps the declared connections alive.

- `bus`: the broadcast event bus (a slow subscriber never slows a publisher).
- `tracing`: the seam for spans that must be current while work runs.
- `connection`: one connection's supervisor task and live record.
- `manager`: the desired set, reconciliation, status and tool calls.
"""
