"""How bytes reach an HTTP server: `streams` (streamable HTTP), `sse` (legacy SSE),
`pool` (HTTP/1.1 keep-alive pool), `relay` (a request as one POST),
`probe` (the TCP pre-check), `liveness` (the idle TCP sentinel), `status`
(an HTTP error status said plainly, with its Retry-After)."""
