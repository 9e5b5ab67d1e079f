"""The control API: a Unix socket the CLI and an attached HUD talk to.

- `protocol`: the wire format (newline-delimited JSON) and its bounds.
- `paths`: where the socket lives and the ownership rules of its directory;
  where its key lives and how a client reads it.
- `keys`: the key each daemon writes beside its socket and asks of every
  client (a confined server cannot read it), and who a refused peer was.
- `server`: `serve_control`, run by the daemon; `dispatch`: one request to
  the backend (`ControlBackend`), its reply in wire form.
- `client`: `ControlClient`, blocking and stdlib only: all the CLI imports for
  its client commands.

This file imports nothing, so `import manager.control.client` stays light.
"""
