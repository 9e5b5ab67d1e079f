"""Keep secrets out of everything the daemon shows.

Redaction is by key and by value:

* by key: a header, env variable, query parameter or `--flag=value` argument whose
  name looks sensitive (`authorization`, `*token*`, `*secret*`, `*key*`,
  `password`, `cookie`, `credential`) is shown as `***`;
* by value: every value registered in a `SecretRegistry` (resolved `${env:...}`
  values, header values, stdio env values, URL passwords) is replaced by `***`
  wherever it appears in a text.

There is no global registry: the daemon makes one (`Daemon.secrets`) and hands
it to whatever registers secrets (the connection factory, the Lua host, the
gateway) and whatever shows text (logs, events, spans, status, Lua). A test gets
its own, so no secret leaks from one test into another's expectations.

Pure: no I/O, no clocks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = [
    "MASK",
    "SecretRegistry",
    "credential_values",
    "is_sensitive_key",
    "redact",
    "redact_args",
    "redact_url",
    "secret_arg_values",
]

MASK = "***"

MIN_SECRET_LENGTH = 4
"""Shorter values are not masked by value: masking "1" everywhere would ruin text.
They are still masked by key."""

_SENSITIVE = re.compile(
    r"authorization|token|secret|key|passw|pwd|cookie|credential", re.IGNORECASE
)
_FLAG_VALUE = re.compile(r"^(-{0,2}[A-Za-z0-9_.-]+)=(.*)$", re.DOTALL)
"""`--flag=value`, `-f=value` and `NAME=value` (as in `docker run -e NAME=value`)."""
_HEADER_VALUE = re.compile(r"^([A-Za-z0-9_-]+):\s*(.*)$", re.DOTALL)
"""`Name: value`, as in `mcp-remote URL --header "Authorization: Bearer ..."`."""


def is_sensitive_key(key: str) -> bool:
    """Whether a header, variable, parameter or flag name looks like a secret's."""
    return bool(_SENSITIVE.search(key))


class SecretRegistry:
    """A set of secret values, masked wherever they appear in text."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def add(self, values: Iterable[str]) -> None:
        """Register secret values; ones shorter than MIN_SECRET_LENGTH are ignored."""
        new = {v for v in values if len(v) >= MIN_SECRET_LENGTH} - self._values
        if new:
            self._values |= new
            ordered = sorted(self._values, key=len, reverse=True)  # longest first
            self._pattern = re.compile("|".join(re.escape(v) for v in ordered))

    def __contains__(self, value: object) -> bool:
        return value in self._values

    def __len__(self) -> int:
        return len(self._values)

    def redact(self, text: str) -> str:
        """`text` with every registered value replaced by `***`."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(MASK, text)


def redact(text: str, secrets: SecretRegistry | None) -> str:
    """Mask the values registered in `secrets` and URL passwords in free text.

    `secrets` is required: pass None only where no registered value can occur
    (say, a URL the operator typed, masked by key).
    """
    if secrets is not None:
        text = secrets.redact(text)
    return _USERINFO.sub(r"\1" + MASK + "@", text) if "@" in text else text


_USERINFO = re.compile(r"(://[^/\s:@]*:)[^/\s@]*@")


def redact_url(url: str, secrets: SecretRegistry | None = None) -> str:
    """`url` with its password and sensitive query values masked (and the values
    of `secrets`, if given)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url, secrets)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{MASK}@{host}" if ":" in userinfo else f"{user}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, MASK if is_sensitive_key(k) else v) for k, v in pairs], safe="*"
        )
    return redact(
        urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)), secrets
    )


def _classified(args: Iterable[str]) -> Iterator[tuple[str, str, str]]:
    """Each argument as (kind, name, value), where a secret may be:
    `value` (the argument after a sensitive flag, as in `--api-key abc`),
    `flag` (`--token=abc`, `NAME=abc`), `header` (`Authorization: Bearer
    abc`), `url` (masked as `redact_url` masks), or `plain`."""
    after_flag = False
    for arg in args:
        if after_flag and not arg.startswith("-"):
            after_flag = False
            yield "value", arg, arg
            continue
        m = _FLAG_VALUE.match(arg)
        h = _HEADER_VALUE.match(arg)
        after_flag = False
        if m and is_sensitive_key(m.group(1)):
            yield "flag", m.group(1), m.group(2)
        elif "://" in arg:
            yield "url", arg, ""
        elif h and is_sensitive_key(h.group(1)):
            yield "header", h.group(1), h.group(2)
        else:
            after_flag = arg.startswith("-") and is_sensitive_key(arg)
            yield "plain", arg, ""


def secret_arg_values(args: Iterable[str]) -> list[str]:
    """The values `redact_args` masks by key: secrets to mask by value too,
    wherever the server echoes them (its stderr, its errors)."""
    found: list[str] = []
    for kind, _, value in _classified(args):
        if kind in ("value", "flag"):
            found.append(value)
        elif kind == "header":
            found.extend(credential_values(value))
    return found


def credential_values(value: str) -> list[str]:
    """A header's value, and its credentials alone where it is
    `SCHEME credentials` (`Bearer abc`): a server that echoes the token
    echoes it without its scheme."""
    scheme, _, credentials = value.strip().partition(" ")
    if credentials and scheme.isalpha():
        return [value, credentials.strip()]
    return [value]


def redact_args(
    args: Iterable[str], secrets: SecretRegistry | None = None
) -> list[str]:
    """Command-line arguments with values of sensitive flags masked.

    `--token=abc` becomes `--token=***`; in `--api-key abc` the `abc` is masked;
    `GITHUB_TOKEN=abc` and `Authorization: Bearer abc` are masked by their key, and
    URL arguments as in `redact_url`.
    """
    out: list[str] = []
    for kind, name, _ in _classified(args):
        if kind == "value":
            out.append(MASK)
        elif kind == "flag":
            out.append(f"{name}={MASK}")
        elif kind == "url":
            out.append(redact_url(name, secrets))
        elif kind == "header":
            out.append(f"{name}: {MASK}")
        else:
            out.append(redact(name, secrets))
    return out
