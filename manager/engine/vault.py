"""Secret references read where they live: the OS keychain, a command, 1Password.

A declared value may name a secret instead of holding it (`core.spec`):

- `${keyring:SERVICE/NAME}`: the OS keychain, through the `keyring` library
  (Secret Service on Linux, macOS Keychain, Windows Credential Locker).
  `mcp-manager secret set SERVICE/NAME` stores one (`store`).
- `${cmd:COMMAND ARGS}`: what a command prints (`pass show github`,
  `gopass show -o x`, `security find-generic-password -w -s x`), run
  without a shell, within `CMD_TIMEOUT` seconds, its output kept for the
  daemon's life and read again after a reload (`Vault.forget`).
- `${op://VAULT/ITEM/FIELD}`: 1Password, through its CLI (`op read`), when
  `op` is on `PATH`.

`Vault.read` reads what a connection's spec names before each attempt; a
secret that cannot be read is a `ConfigError` naming the connection, the
reference and what to do, and the connection keeps retrying (a keychain
unlocked later, an `op signin`, a stored secret are picked up). The values are
registered as secrets (`core.resolve`): never in a log, event, span, status or
the HUD.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterable
from typing import Any

import anyio

from ..core.errors import ConfigError

__all__ = ["CMD_TIMEOUT", "Vault", "in_clear", "store"]

CMD_TIMEOUT = 10.0
"""Seconds a `${cmd:...}` or `op read` may take."""

Reference = tuple[str, str]


class Vault:
    """Reads secret references; keeps command output until `forget`.

    Args:
        timeout: Seconds one command may take.
        which: Finds a program on PATH (injectable).
    """

    def __init__(
        self,
        timeout: float = CMD_TIMEOUT,
        which: Callable[[str], str | None] = shutil.which,
    ) -> None:
        self._timeout = timeout
        self._which = which
        self._kept: dict[Reference, str] = {}

    def forget(self) -> None:
        """Read command outputs again from now on (a reload)."""
        self._kept.clear()

    async def read(
        self, connection: str, references: Iterable[Reference]
    ) -> dict[Reference, str]:
        """The value of each reference.

        Raises:
            ConfigError: One cannot be read; the message says which and why.
        """
        values: dict[Reference, str] = {}
        for reference in sorted(references):
            kind, text = reference
            if kind == "keyring":
                values[reference] = await self._keychain(connection, text)
                continue
            kept = self._kept.get(reference)
            if kept is None:
                if kind == "op":
                    kept = await self._op(connection, text)
                else:
                    kept = await self._command(connection, text, f"${{cmd:{text}}}")
                self._kept[reference] = kept
            values[reference] = kept
        return values

    async def _keychain(self, connection: str, reference: str) -> str:
        """The keychain's answer within the timeout (a locked Secret Service
        may wait on a prompt nobody sees)."""
        try:
            with anyio.fail_after(self._timeout):
                return await anyio.to_thread.run_sync(
                    _from_keyring, connection, reference, abandon_on_cancel=True
                )
        except TimeoutError:
            raise ConfigError(
                f"mcp_add({connection!r}): ${{keyring:{reference}}}: the keychain "
                f"did not answer within {self._timeout:g} s (locked?)",
                connection=connection,
            ) from None

    async def _op(self, connection: str, reference: str) -> str:
        if self._which("op") is None:
            raise ConfigError(
                f"mcp_add({connection!r}): ${{{reference}}} needs the 1Password CLI "
                "`op`, which is not on the daemon's PATH: install it and sign in "
                "(`op signin`), or use another kind of reference",
                connection=connection,
            )
        return await self._run(
            connection, ["op", "read", reference], f"${{{reference}}}"
        )

    async def _command(self, connection: str, command: str, shown: str) -> str:
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ConfigError(
                f"mcp_add({connection!r}): {shown}: cannot split the command ({exc})",
                connection=connection,
            ) from None
        return await self._run(connection, argv, shown)

    async def _run(self, connection: str, argv: list[str], shown: str) -> str:
        where = f"mcp_add({connection!r}): {shown}"
        try:
            with anyio.fail_after(self._timeout):
                # Not the daemon's terminal, which the HUD may be reading.
                done = await anyio.run_process(
                    argv, check=False, stdin=subprocess.DEVNULL
                )
        except TimeoutError:
            raise ConfigError(
                f"{where}: the command took longer than {self._timeout:g} s",
                connection=connection,
            ) from None
        except OSError as exc:
            raise ConfigError(
                f"{where}: cannot run {argv[0]!r} ({exc.strerror or exc})",
                connection=connection,
            ) from None
        if done.returncode != 0:
            raise ConfigError(
                f"{where}: the command exited with status {done.returncode} "
                "(run it yourself to see why)",
                connection=connection,
            )
        value = done.stdout.decode(errors="replace").strip()
        if not value:
            raise ConfigError(
                f"{where}: the command printed nothing", connection=connection
            )
        return value


def _keyring() -> Any:
    try:
        import keyring
    except ImportError:  # a broken install: keyring is a dependency
        raise ConfigError("the keyring library is not installed") from None
    return keyring


def _from_keyring(connection: str, reference: str) -> str:
    service, _, name = reference.partition("/")
    where = f"mcp_add({connection!r}): ${{keyring:{reference}}}"
    try:
        value = _get(reference)
    except _Unusable as exc:
        raise ConfigError(
            f"{where}: no keychain this daemon can use ({exc}); unlock or "
            "install one (Secret Service, macOS Keychain), or use ${env:NAME} "
            "or ${cmd:...}",
            connection=connection,
        ) from None
    if value is None:
        raise ConfigError(
            f"{where}: the keychain has no secret {service}/{name}; store it with "
            f"`mcp-manager secret set {service}/{name}`",
            connection=connection,
        )
    return str(value)


_IN_CLEAR = frozenset({"PlaintextKeyring"})
"""keyring backends that keep the value readable in a file (keyrings.alt's
`PlaintextKeyring`: base64 in ~/.local/share/python_keyring), the one keyring
falls back to where no Secret Service runs (a headless machine)."""


def in_clear(backend: str) -> str | None:
    """A warning when `backend` (what `store` returned) keeps values in
    clear; None for a real keychain."""
    if backend not in _IN_CLEAR:
        return None
    return (
        f"warning: the keychain found here is {backend}, a plain file "
        "(~/.local/share/python_keyring) anyone who can read your files can "
        "read the value from; unlock a Secret Service (GNOME Keyring, KWallet) "
        "and store it again, or use ${env:NAME} instead"
    )


def held(reference: str) -> str | None:
    """What the keychain holds under `SERVICE/NAME` (None: nothing).

    Raises:
        ConfigError: No usable keychain.
    """
    try:
        return _get(reference)
    except _Unusable as exc:
        raise ConfigError(f"no keychain to store {reference} in ({exc})") from None


class _Unusable(Exception):
    """The keychain could not be read (its error, as `Type: text`)."""


def _get(reference: str) -> str | None:
    """The keychain's value under `SERVICE/NAME` (None: nothing)."""
    service, _, name = reference.partition("/")
    keyring = _keyring()
    try:
        value = keyring.get_password(service, name)
    except keyring.errors.KeyringError as exc:
        raise _Unusable(f"{type(exc).__name__}: {exc}") from None
    return None if value is None else str(value)


def store(reference: str, value: str) -> str:
    """Store `value` in the keychain under `SERVICE/NAME`; returns where.

    Raises:
        ConfigError: A bad reference, or no usable keychain.
    """
    service, _, name = reference.partition("/")
    if not service or not name:
        raise ConfigError(
            f"{reference!r}: name it SERVICE/NAME, e.g. github/token "
            "(then ${keyring:github/token} in startup.lua)"
        )
    keyring = _keyring()
    try:
        keyring.set_password(service, name, value)
        backend = type(keyring.get_keyring()).__name__
    except keyring.errors.KeyringError as exc:
        raise ConfigError(
            f"no keychain to store {reference} in ({type(exc).__name__}: {exc})"
        ) from None
    return backend
