"""How bytes reach a process: `process` (spawn in a process group, stdout
lines, stderr, stop), `children` (the guardian of running servers' process
groups), `starts` (bounded, paced starts), `locks` (a server fetched from a registry
starts the version locked at its first start) and `registries` (what npm, a
Python index or an OCI registry would give)."""
