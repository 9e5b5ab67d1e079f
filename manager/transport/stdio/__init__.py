"""How bytes reach a process: `process` (spawn in a process group, stdout
lines, stderr, stop), `children` (the guardian of running servers' process
groups), `starts` (bounded, paced starts)."""
