"""The daemon's lifecycle.

- `serve`: startup, serve (signals, reload), shutdown; the `Daemon` the control
  API and the HUD talk to.
- `config_runner`: runs startup.lua, reloads it on save, runs its hooks.
- `watchdog`: notices an event loop that stopped turning; keeps SIGTERM working.
- `notify`: a desktop notification when a call waits for the user's approval.
- `pins_check`: `mcp-manager pins check`: each server's listing against its
  pins, without a daemon, writing nothing.

This file imports nothing: the CLI imports `watchdog` for its defaults.
"""
