"""The OAuth 2.1 client of a remote server: `auth` (`ConnectionAuth`, the
flow over the SDK's providers), `login` (the one-shot loopback callback),
`tokens` (one 0600 token file per connection), `device` (RFC 8628)."""
