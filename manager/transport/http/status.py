"""An HTTP error status a server answered with, said plainly, with its Retry-After.

The SDK's streamable HTTP client turns a POST answered 4xx/5xx without a
JSON-RPC error in its body into a stand-in ("Server returned an error
response", or "Not Found"): the status, and a `Retry-After` asking us to
slow down, are lost. `DrainingTransport` keeps them (`HttpStatus`) for the
connect to say (`said`) and for the next try to wait (`retry_after`).
"""

from __future__ import annotations

import email.utils
import http
import time
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["STAND_INS", "HttpStatus", "retry_after"]

STAND_INS = frozenset({"Server returned an error response", "Not Found"})
"""What the SDK's client (and our relay, as it does) says for a status with no
JSON-RPC error in its body."""


@dataclass(frozen=True, slots=True)
class HttpStatus:
    """An HTTP status of 400 or more, and how long the server asked us to wait
    before the next request (`Retry-After`, seconds; None when it did not)."""

    status: int
    retry_after: float | None = None

    @classmethod
    def of(cls, status: int, headers: Mapping[str, str]) -> HttpStatus:
        return cls(status, retry_after(headers.get("retry-after")))

    def said(self) -> str:
        """`HTTP 429 Too Many Requests; it asks to wait 30 s (Retry-After)`."""
        try:
            phrase = f" {http.HTTPStatus(self.status).phrase}"
        except ValueError:
            phrase = ""
        text = f"HTTP {self.status}{phrase}"
        if self.retry_after is not None:
            text += f"; it asks to wait {self.retry_after:g} s (Retry-After)"
        return text


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a `Retry-After` value asks for: delay-seconds or an HTTP-date
    (RFC 9110 §10.2.3); None when absent or unreadable, 0 for a date passed."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(int(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
