"""`resolve_spec`: a declared spec made ready to connect, at connect time.

`${env:NAME}` templates are substituted from the environment the daemon runs
in (read on every attempt, so a changed variable takes effect at the next
reconnect), secret references (`${keyring:...}`, `${cmd:...}`, `${op://...}`)
from the values `engine.vault` read for them (`references` says which), and
every value that must never be shown (resolved template values, header
values, stdio env values, URL passwords) is registered in the daemon's
`SecretRegistry`. Pure: the environment and the read secrets are passed in.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from .errors import ConfigError
from .redact import SecretRegistry, credential_values, secret_arg_values
from .spec import TEMPLATE, ConnectionSpec, parse_reference

__all__ = ["references", "resolve_spec", "spec_secrets"]

Reference = tuple[str, str]
"""(kind, reference): `("keyring", "svc/name")`, `("cmd", "pass show x")`..."""


def references(spec: ConnectionSpec) -> frozenset[Reference]:
    """The secret references `spec`'s values name (none in the common case)."""
    if not _has_templates(spec):
        return frozenset()
    texts = [spec.url, spec.command, spec.cwd or "", *spec.args]
    texts += [v for _, v in (*spec.env, *spec.headers)]
    if spec.oauth is not None:
        texts += [spec.oauth.client_secret or "", spec.oauth.private_key or ""]
    found = (parse_reference(m.group(1)) for t in texts for m in TEMPLATE.finditer(t))
    return frozenset(ref for ref in found if ref is not None)


def resolve_spec(
    spec: ConnectionSpec,
    getenv: Callable[[str], str | None],
    secrets: SecretRegistry,
    read: Mapping[Reference, str] | None = None,
) -> ConnectionSpec:
    """Substitute `${env:NAME}` and the secret references (their values in
    `read`), and register every secret value of `spec`.

    Secrets are: resolved template values, header values, stdio env values and URL
    passwords.

    Raises:
        ConfigError: A referenced environment variable is not set, or a
            reference was not read.
    """
    resolved_values: list[str] = []
    read = read or {}

    def sub(text: str) -> str:
        def one(m: re.Match[str]) -> str:
            reference = parse_reference(m.group(1))
            if reference is not None:
                value = read.get(reference)
                if value is None:
                    raise ConfigError(
                        f"mcp_add({spec.name!r}): the secret ${{{m.group(1)}}} "
                        "was not read",
                        connection=spec.name,
                    )
                resolved_values.append(value)
                return value
            var = m.group(1)[4:]
            value = getenv(var)
            if value is None:
                raise ConfigError(
                    f"mcp_add({spec.name!r}): environment variable {var} is not set "
                    f"(used as ${{env:{var}}}); set it in the environment the daemon "
                    "starts with, or change the declaration",
                    connection=spec.name,
                )
            resolved_values.append(value)
            return value

        return TEMPLATE.sub(one, text) if "${" in text else text

    if not _has_templates(spec):
        resolved = spec  # the common case, on every attempt: no copy
    else:
        resolved = dataclasses.replace(
            spec,
            url=sub(spec.url),
            command=sub(spec.command),
            args=tuple(sub(a) for a in spec.args),
            env=tuple((k, sub(v)) for k, v in spec.env),
            cwd=sub(spec.cwd) if spec.cwd else spec.cwd,
            headers=tuple((k, sub(v)) for k, v in spec.headers),
            oauth=(
                dataclasses.replace(
                    spec.oauth,
                    client_secret=_sub_opt(sub, spec.oauth.client_secret),
                    private_key=_sub_opt(sub, spec.oauth.private_key),
                )
                if spec.oauth is not None
                else spec.oauth
            ),
        )
    secret_values = [*resolved_values, *spec_secrets(resolved, templates=True)]
    if secret_values:
        secrets.add(secret_values)
    return resolved


def spec_secrets(spec: ConnectionSpec, templates: bool = False) -> list[str]:
    """The secret values written in `spec` itself: header values (and a
    header's token alone), stdio env values, what `redact_args` masks in its
    args, its OAuth client secret and key, its URL's password. A value
    holding a `${...}` template is left out (it is not the secret yet) unless
    `templates` (a resolved spec: whatever it holds is its value)."""
    found: list[str] = []
    for _, value in spec.headers:
        found += credential_values(value)
    found += [v for _, v in spec.env]
    found += secret_arg_values(spec.args)
    if spec.oauth is not None:
        for secret in (spec.oauth.client_secret, spec.oauth.private_key):
            if secret is not None:
                found.append(secret)
    password = _url_password(spec.url)
    if password:
        found.append(password)
    return found if templates else [value for value in found if "${" not in value]


def _sub_opt(sub: Callable[[str], str], text: str | None) -> str | None:
    return None if text is None else sub(text)


def _has_templates(spec: ConnectionSpec) -> bool:
    texts = (spec.url, spec.command, spec.cwd or "", *spec.args)
    if spec.oauth is not None and "${" in (
        (spec.oauth.client_secret or "") + (spec.oauth.private_key or "")
    ):
        return True
    return any("${" in t for t in texts) or any(
        "${" in v for _, v in (*spec.env, *spec.headers)
    )


@functools.lru_cache(maxsize=4096)
def _url_password(url: str) -> str | None:
    try:
        return urlsplit(url).password if url else None
    except ValueError:
        return None
