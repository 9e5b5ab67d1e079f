"""The pure core: facts and rules, no I/O, no clocks, no randomness.

- `errors`: the exception tree (`ManagerError` and its branches).
- `events`: the typed events and their wire form (`event_to_dict`, `event_from_dict`).
- `describe`: the one sentence per event (log, HUD, `mcp-manager events`).
- `text`: the short texts shared by everything the user reads (`first_line`,
  `list_names`, `login_command`, `meant`: "did you mean ...?").
- `backoff`: the retry schedule.
- `redact`: masking secrets by key and by value.
- `spec`: parsing and validating a declared connection (`ConnectionSpec`);
  what a reload changed (`changed_fields`) and whether it applies without a
  reconnect (`applies_live`).
- `resolve`: `${env:...}` substitution and secret registration at connect time.
- `exposure`: what the endpoint shows of a connection (prefix, filters, roots).
- `oauth`: the `oauth = {...}` option, parsed.
- `profile`: `mcp_profile` declarations (`Profile`), views of the endpoint.
- `policy`: `mcp_policy` rules (`Rule`, `parse_rule`) and `decide`, the
  first matching rule's verdict on a call; `annotations` overrides.
- `status`: `ConnectionStatus`, the typed status of one connection.
- `replies`: the control socket's other replies, typed (`ReloadSummary`,
  `ConnectionDetails`, `CatalogRow`, ...), each with its wire form both ways
  (`to_dict`, `from_dict`); `info` (`DaemonInfo`) and `login` (the logins'
  replies) beside it.
- `wire`: forgiving readers for values coming back over the socket.
- `state`: the connection state machine (`transition`).
- `once`: at most once: which requests may be sent again (`may_repeat`) and
  what a client whose request may have run is told (`stopped_error`).
- `sandbox`: what a confined stdio server may read, write and connect to
  (`parse_sandbox`, `rules` for the launcher `manager/confine.py`).
- `output`: tool results that fit `max_output` (`fit`: cut, with a note and a
  link to the whole), tokens estimated offline.
- `launch`: launches that fetch their server from a registry (`npx`, `uvx`,
  `docker run`, ...): the package in a command line, and the command line
  that starts one exact version (`parse_launch`, `Launch.locked`).
- `suspicious`: definitions whose text speaks to the model (`scan_definition`,
  `Finding`): hidden characters, instructions, secrets, URLs to send data to.

Nothing here imports anyio, mcp, lupa, rich or opentelemetry.
"""
