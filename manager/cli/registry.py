"""`mcp-manager add REF`: a server from the MCP registry's `server.json`.

REF is a `server.json` file, an `http(s)://` URL of one, or a server's name
(`io.github.owner/name`), looked up at `--registry` (default the official
registry, `REGISTRY`; `GET /v0.1/servers/NAME/versions/latest`). The server
becomes one `mcp_add` statement:

- a package (npm: `npx -y ID@VERSION`; PyPI: `uvx ID==VERSION`; OCI:
  `docker run -i --rm ... IMAGE`) at the exact version the document names,
  with its fixed arguments; an environment variable it marks secret, or
  requires without a default, is read from `${env:NAME}`;
- or, with no package we can run, its streamable HTTP (or SSE) remote, a
  secret header from `${env:NAME}`;
- with `pin = "strict"` and, for a package, `sandbox = "strict"`: code from a
  registry is trusted with nothing until the user says so.

It is printed, with the exact command on stderr; `--write` appends it to
startup.lua as `import --write` does (it must pass `check`), after showing
the command and asking (`--yes` at no terminal). An argument or variable the
document requires with no value is a clear error naming it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .exits import fail
from .translate import (
    Declaration,
    LuaValue,
    connection_name,
    lua_statement,
    what_it_runs,
)

__all__ = ["declaration_of", "run_add"]


FETCH_TIMEOUT = 15.0
"""Seconds a `server.json` may take to arrive."""

_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class NotRunnable(Exception):
    """The document names nothing we can start, or leaves a value to fill."""


def _first(item: dict[str, Any], *keys: str) -> Any:
    """The value of the first of `keys` in `item` (camelCase, then the older
    snake_case spelling of the schema)."""
    for key in keys:
        if key in item:
            return item[key]
    return None


def _arguments(items: list[Any], what: str) -> list[str]:
    """Fixed arguments, as given: a positional's value (or default), a named
    one's name and value; a required one with neither is an error."""
    argv: list[str] = []
    for item in items or []:
        if not isinstance(item, dict):
            continue
        value = _first(item, "value", "default")
        name = item.get("name")
        required = _first(item, "isRequired", "is_required") is True
        if item.get("type") == "named" and isinstance(name, str):
            if value is None:
                if required:
                    raise NotRunnable(
                        f"{what}: {name} needs a value the document leaves open"
                    )
                continue
            argv += [name, str(value)]
        elif value is not None:
            argv.append(str(value))
        elif required:
            hint = _first(item, "valueHint", "value_hint") or "a value"
            raise NotRunnable(f"{what}: a positional argument ({hint}) needs a value")
    return argv


def _environment(items: list[Any]) -> dict[str, LuaValue]:
    """The environment: a secret or required value from `${env:NAME}`, a
    default as given, an optional one without a default left out."""
    env: dict[str, LuaValue] = {}
    for item in items or []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        name = item["name"]
        secret = _first(item, "isSecret", "is_secret") is True
        default = item.get("default")
        if secret or (default is None and _first(item, "isRequired", "is_required")):
            env[name] = f"${{env:{name}}}"
        elif default is not None:
            env[name] = str(default)
    return env


def _package(package: dict[str, Any]) -> dict[str, LuaValue]:
    """The stdio endpoint that runs one package at its exact version."""
    kind = _first(package, "registryType", "registry_type")
    ident = str(package.get("identifier", ""))
    version = package.get("version")
    what = f"{kind} package {ident}"
    runtime = _arguments(_first(package, "runtimeArguments", "runtime_arguments"), what)
    args = _arguments(_first(package, "packageArguments", "package_arguments"), what)
    if kind == "npm":
        command, argv = (
            "npx",
            ["-y", *runtime, f"{ident}@{version}" if version else ident],
        )
    elif kind == "pypi":
        command, argv = "uvx", [*runtime, f"{ident}=={version}" if version else ident]
    elif kind == "oci":
        image = (
            ident
            if version is None or ":" in ident.rsplit("/", 1)[-1]
            else f"{ident}:{version}"
        )
        command, argv = "docker", ["run", "-i", "--rm", *runtime, image]
    else:
        raise NotRunnable(
            f"{what}: a {kind} package is not one we start (npm, pypi, oci)"
        )
    if not version and kind != "oci":
        raise NotRunnable(f"{what}: no version named; a launch must be exact")
    fields: dict[str, LuaValue] = {"command": command, "args": [*argv, *args]}
    env = _environment(_first(package, "environmentVariables", "environment_variables"))
    if env:
        fields["env"] = env
    return fields


def _remote(remote: dict[str, Any]) -> dict[str, LuaValue]:
    """The HTTP endpoint of one remote, its variables at their defaults."""
    kind = _first(remote, "type", "transport_type")
    url = str(remote.get("url", ""))
    variables = remote.get("variables") or {}

    def filled(match: re.Match[str]) -> str:
        spec = variables.get(match.group(1)) or {}
        if "default" not in spec:
            raise NotRunnable(f"remote {url}: {{{match.group(1)}}} needs a value")
        return str(spec["default"])

    fields: dict[str, LuaValue] = {"url": _VARIABLE.sub(filled, url)}
    if kind == "sse":
        fields["transport"] = "sse"
    elif kind != "streamable-http":
        raise NotRunnable(f"remote {url}: a {kind} remote is not one we reach")
    headers: dict[str, LuaValue] = {}
    for header in remote.get("headers") or []:
        name = header.get("name") if isinstance(header, dict) else None
        if not isinstance(name, str):
            continue
        secret = _first(header, "isSecret", "is_secret") is True
        if secret or header.get("default") is None:
            variable = re.sub(r"[^A-Za-z0-9]+", "_", name).upper()
            headers[name] = f"${{env:{variable}}}"
        else:
            headers[name] = str(header["default"])
    if headers:
        fields["headers"] = headers
    return fields


def declaration_of(document: dict[str, Any], name: str | None = None) -> Declaration:
    """The `mcp_add` statement for a `server.json` document.

    Raises:
        NotRunnable: Nothing in it can be started or reached as given.
    """
    wrapped = document.get("server")  # the registry API wraps it
    server: dict[str, Any] = wrapped if isinstance(wrapped, dict) else document
    title = str(server.get("name", ""))
    problems: list[str] = []
    fields: dict[str, LuaValue] | None = None
    # A package we can run first, else a remote we can reach.
    makers = ((server.get("packages"), _package), (server.get("remotes"), _remote))
    for items, endpoint in makers:
        for item in items or []:
            try:
                fields = endpoint(item)
                break
            except NotRunnable as exc:
                problems.append(str(exc))
        if fields is not None:
            break
    if fields is None:
        raise NotRunnable("; ".join(problems) or f"{title}: no package and no remote")
    fields["pin"] = "strict"
    if "command" in fields:
        fields["sandbox"] = "strict"
    connection = connection_name(name or title.rsplit("/", 1)[-1] or "server")
    return Declaration(connection, fields, (f"from the registry's {title}",))


def _read(ref: str, registry: str) -> dict[str, Any]:
    """The document REF names: a file, a URL, or a name at `registry`."""
    if ref.startswith(("http://", "https://")):
        url = ref
    elif Path(ref).exists() or ref.endswith(".json"):
        return json.loads(Path(ref).read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    else:
        quoted = quote(ref, safe="")
        url = f"{registry.rstrip('/')}/v0.1/servers/{quoted}/versions/latest"
    # Here, not at the top: every CLI command imports this module to list
    # `add`, and urllib.request (http.client, ssl, email) costs them ~35 ms.
    from urllib.request import Request, urlopen

    request = Request(url, headers={"Accept": "application/json"})
    with urlopen(request, timeout=FETCH_TIMEOUT) as answer:
        return json.loads(answer.read())  # type: ignore[no-any-return]


def run_add(args: argparse.Namespace) -> int:
    """`mcp-manager add` (parsed by `config_commands`)."""
    from .importing import append_statements

    try:
        document = _read(args.ref, args.registry)
        if not isinstance(document, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        return fail(f"cannot read {args.ref}: {exc}")
    try:
        declaration = declaration_of(document, args.name)
    except NotRunnable as exc:
        return fail(f"{args.ref}: nothing added: {exc}")
    print(f"{declaration.name} would run: {what_it_runs(declaration)}", file=sys.stderr)
    statement = lua_statement(declaration)
    needed = sorted(set(re.findall(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}", statement)))
    if needed:
        unset = [name for name in needed if name not in os.environ]
        print(
            f"{declaration.name} reads {', '.join(needed)} from the environment the "
            "daemon starts with: export "
            + " ".join(f"{name}=..." for name in needed)
            + " there"
            + (f" ({', '.join(unset)} not set here)" if unset else ""),
            file=sys.stderr,
        )
    text = f"-- from the MCP registry: {args.ref}\n{statement}\n"
    if not args.write:
        sys.stdout.write(text)
        return 0
    return append_statements(Path(args.config), text, [declaration.name], args.yes)
