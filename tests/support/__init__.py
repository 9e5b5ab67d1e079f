"""Helpers several test modules share (no test module imports another):

- `gateway`: a gateway in front of real upstreams, SDK sessions to it;
- `clients`: a downstream client that records and answers;
- `eras`: comparing answers straight and through the daemon;
- `oauth`: the daemon's logins in-process and a user who logs in;
- `events`: one example of every event type;
- `control`: requests on the control socket by hand, carrying its key.
"""
