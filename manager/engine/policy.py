"""The call policy at work: rules judged on the call path, asks answered by the user.

`Policy.admit` runs before a tool call is sent (`Manager.call`, so every
surface: the endpoint over HTTP and stdio, `attach`, `mcp-manager call`, Lua's
`mcp_call`). The first matching `mcp_policy` rule (`core.policy.decide`) says
`allow` (the call goes on, nothing published), `deny` (`PolicyDenied`, a tool
error naming the rule) or `ask`: the call waits, an `ApprovalAsked` event says
so (the HUD shows a prompt row, the log a line naming the commands), and only
the user answers, through the control socket (`mcp-manager allow ID` / `deny
ID`, the HUD's keys): the MCP endpoint has no way to answer it, and nothing is
asked of the calling client. Unanswered by its deadline (the rule's `timeout`,
at least the call's `call_timeout`), it is denied.

An answer may cover more than the one call: `session` allows the same tool
for the same client until the daemon stops, `always` allows the tool for
every client and is kept in `approvals.json` in the state directory (beside
the pins), so it outlives restarts; a rule that says `deny` still wins over
both, as rules come first.
"""

from __future__ import annotations

import json
import logging
import secrets as token_source
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio

from ..core.errors import PolicyDenied
from ..core.events import ApprovalAsked, ApprovalDecided, Event
from ..core.policy import CallFacts, Check, Decision, Rule, decide, masked
from ..core.redact import SecretRegistry, redact
from ..files import write_private_json

__all__ = ["SCOPES", "Caller", "Policy"]

logger = logging.getLogger(__name__)

SCOPES = ("once", "session", "always")
"""How far an answer reaches: this call, the client's calls of that tool
until the daemon stops, every call of that tool from now on."""

_MAX_PENDING = 1000
"""Calls that may wait for an answer at once; more are denied at once."""

_ARGUMENTS_SHOWN = 2000
"""Characters of a call's arguments shown with its question."""


@dataclass(slots=True)
class Caller:
    """Who makes one call, as the policy matches it, and what it said.

    Attributes:
        client: The client's own name (`clientInfo.name`), or the surface's
            (`cli` for `mcp-manager call`, `lua` for `mcp_call`).
        profile: The endpoint profile it came through ("" for none).
        verdict: Set by `Policy.admit` when a rule did more than allow
            (`denied by rule FILE:LINE`, `allowed by cli (once)`, ...), for
            the call log.
    """

    client: str = ""
    profile: str = ""
    verdict: str = ""


class _Waiting:
    __slots__ = (
        "asked",
        "by",
        "done",
        "facts",
        "recheck",
        "rejudged",
        "scope",
        "verdict",
    )

    def __init__(self, asked: ApprovalAsked, facts: CallFacts) -> None:
        self.asked = asked
        self.facts = facts
        self.rejudged = ""  # after a reload: what the new rules said, and where
        self.done = anyio.Event()
        self.recheck = anyio.Event()  # the rules changed: judge it again
        self.verdict = "deny"
        self.by = "deadline"
        self.scope = "once"


async def _either(first: anyio.Event, second: anyio.Event) -> None:
    """Until one of the two is set."""
    async with anyio.create_task_group() as tg:

        async def wait(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(wait, first)
        tg.start_soon(wait, second)


class Policy:
    """The rules in force and the calls waiting for the user.

    Args:
        publish: Where `ApprovalAsked` and `ApprovalDecided` go (the bus).
        state_dir: Where `approvals.json` (allowed always) is kept.
        secrets: Masks secrets in the arguments a question shows.
        clock: Wall-clock seconds (events' deadlines).
    """

    def __init__(
        self,
        publish: Callable[[Event], object],
        state_dir: Path,
        secrets: SecretRegistry,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._publish = publish
        self._path = state_dir / "approvals.json"
        self._secrets = secrets
        self._clock = clock
        self.rules: tuple[Rule, ...] = ()
        """In force (`mcp_policy`, set by each load of the script)."""
        self.check: Check | None = None
        """Runs a rule's `check` function (the daemon's live script)."""
        self._waiting: dict[str, _Waiting] = {}
        self._session: set[tuple[str, str, str]] = set()
        self._always: set[tuple[str, str]] | None = None

    def set_rules(self, rules: tuple[Rule, ...], check: Check | None) -> None:
        """The rules of a script that loaded, and what runs their checks.

        The calls waiting for an answer are judged again: one the new rules
        allow or deny ends so (`by` `reload`), one they still ask about waits on.
        """
        self.rules, self.check = rules, check
        # Each waiting call judges itself again, in its own task: a check
        # runs in a copy of the script that may take its whole budget, and
        # twenty of them one after another would hold the loop that long.
        for waiting in self._waiting.values():
            waiting.recheck.set()

    async def _rejudge(self, waiting: _Waiting) -> None:
        """Judge a waiting call by the rules now in force (`set_rules`)."""
        decision = await decide(self.rules, waiting.facts, self.check, self._secrets)
        if decision.verdict == "ask" or waiting.done.is_set():
            return
        waiting.verdict, waiting.by = decision.verdict, "reload"
        waiting.rejudged = (
            f"rule at {decision.where}" if decision.rule else "no rule matches"
        )
        waiting.done.set()

    async def admit(
        self,
        server: str,
        tool: str,
        exposed: str,
        caller: Caller | None,
        annotations: Callable[[], Mapping[str, object]],
        arguments: Mapping[str, object] | None,
        limit: float,
        listed: Callable[[], bool] = lambda: True,
    ) -> None:
        """Let the call go on, or raise `PolicyDenied` (a rule, the user, or
        no answer within `limit` or the rule's `timeout`, the longer).

        Args:
            annotations: The tool's annotations with the connection's
                overrides (asked only when a rule looks at them).
            listed: Whether the server lists `tool` (False: the user is not
                asked about a tool that is not there; the call is refused).
        """
        if not self.rules:
            return
        who = caller if caller is not None else Caller()
        facts = CallFacts(
            server=server,
            tool=tool,
            exposed=exposed,
            client=who.client,
            profile=who.profile,
            annotations=_Lazy(annotations),
            arguments=arguments or {},
        )
        decision = await decide(self.rules, facts, self.check, self._secrets)
        if decision.verdict == "allow":
            return
        if decision.verdict == "deny":
            who.verdict = f"denied by rule {decision.where}"
            self._decided(server, tool, who, "deny", f"rule {decision.where}")
            raise PolicyDenied(
                f"denied by policy rule at {decision.where}"
                + (f" ({decision.reason})" if decision.reason else "")
            )
        if (who.client, server, tool) in self._session or (
            server,
            tool,
        ) in self._allowed_always():
            scope = (
                "session" if (who.client, server, tool) in self._session else "always"
            )
            who.verdict = f"allowed, remembered ({scope})"
            self._decided(server, tool, who, "allow", "remembered", scope)
            return
        if not listed():
            who.verdict = f"refused: not a listed tool, rule {decision.where}"
            raise PolicyDenied(
                f"{server} lists no tool {tool!r}; not sent (the rule at "
                f"{decision.where} would ask you first): see mcp-manager tools "
                f"{server}"
            )
        await self._ask(server, tool, who, decision, facts, limit)

    async def _ask(
        self,
        server: str,
        tool: str,
        who: Caller,
        decision: Decision,
        facts: CallFacts,
        limit: float,
    ) -> None:
        rule = decision.rule
        wait = max(limit, rule.timeout or 0.0) if rule is not None else limit
        if len(self._waiting) >= _MAX_PENDING:
            who.verdict = "denied: too many calls waiting for approval"
            self._decided(server, tool, who, "deny", "too many waiting")
            raise PolicyDenied(
                f"denied: {_MAX_PENDING} calls already wait for your approval"
            )
        approval = token_source.token_hex(4)
        while approval in self._waiting:
            approval = token_source.token_hex(4)
        why = decision.where + (f": {decision.reason}" if decision.reason else "")
        asked = ApprovalAsked(
            name=server,
            tool=tool,
            approval=approval,
            client=redact(who.client, self._secrets),
            rule=why,
            arguments=self._shown(facts.arguments),
            deadline=self._clock() + wait,
        )
        waiting = _Waiting(asked, facts)
        self._waiting[approval] = waiting
        self._publish(asked)
        try:
            with anyio.move_on_after(wait):
                while not waiting.done.is_set():
                    await _either(waiting.done, waiting.recheck)
                    if waiting.recheck.is_set() and not waiting.done.is_set():
                        waiting.recheck = anyio.Event()
                        await self._rejudge(waiting)
        except anyio.get_cancelled_exc_class():
            # the caller went away (a client that hung up, a cancelled
            # request): nobody waits for this call; the question ends here
            if not waiting.done.is_set():
                waiting.verdict, waiting.by = "deny", "withdrawn"
                who.verdict = f"withdrawn by its caller, rule {decision.where}"
            raise
        finally:
            del self._waiting[approval]
            self._publish(
                ApprovalDecided(
                    name=server,
                    tool=tool,
                    verdict=waiting.verdict,
                    by=waiting.by,
                    scope=waiting.scope,
                    approval=approval,
                    client=redact(who.client, self._secrets),
                )
            )
        who.verdict = (
            f"allowed by {waiting.by} ({waiting.scope})"
            if waiting.verdict == "allow"
            else "not approved in time"
            if waiting.by == "deadline"
            else "the server was removed"
            if waiting.by == "removal"
            else "the daemon stopped"
            if waiting.by == "stop"
            else f"denied by {waiting.by}"
        ) + (
            # judged again by the reloaded rules: theirs, not the one that asked
            f", {waiting.rejudged}"
            if waiting.by == "reload"
            else f", rule {decision.where}"
        )
        if waiting.verdict != "allow":
            if waiting.by == "removal":
                raise PolicyDenied(
                    f"{server} was removed from the config while the call waited "
                    f"for approval (policy rule at {decision.where}); not sent"
                )
            if waiting.by == "stop":
                raise PolicyDenied(
                    "mcp-manager stopped while the call waited for approval "
                    f"(policy rule at {decision.where}); not sent"
                )
            if waiting.by == "reload":
                raise PolicyDenied(
                    f"denied by the policy reloaded while the call waited for "
                    f"approval ({waiting.rejudged}); not sent"
                )
            if waiting.by == "deadline":
                raise PolicyDenied(
                    f"not approved within {wait:g} s (policy rule at {decision.where} "
                    f"asks the user: mcp-manager allow ID, or the HUD)"
                )
            raise PolicyDenied(
                f"denied by the user ({waiting.by}; policy rule at {decision.where})"
            )

    def forget(self, server: str) -> None:
        """`server` was removed: its calls waiting for an answer are denied
        now (the question is gone from `pending`), not left to their deadline."""
        for waiting in list(self._waiting.values()):
            if waiting.asked.name == server and not waiting.done.is_set():
                waiting.verdict, waiting.by = "deny", "removal"
                waiting.done.set()

    def stop(self) -> None:
        """The daemon stops: every call waiting for an answer ends unsent."""
        for waiting in self._waiting.values():
            if not waiting.done.is_set():
                waiting.verdict, waiting.by = "deny", "stop"
                waiting.done.set()

    def pending(self) -> list[ApprovalAsked]:
        """The calls waiting for an answer, oldest first."""
        return [w.asked for w in self._waiting.values()]

    def grants(self) -> list[dict[str, str]]:
        """The standing answers: tools allowed `always` (every client, kept
        in `approvals.json`) and for a `session` (one client, until the
        daemon stops), by server and tool."""
        rows = [
            {"scope": "always", "server": s, "tool": t, "client": ""}
            for s, t in sorted(self._allowed_always())
        ]
        rows += [
            {"scope": "session", "server": s, "tool": t, "client": c}
            for c, s, t in sorted(self._session, key=lambda g: (g[1], g[2], g[0]))
        ]
        return rows

    def revoke(self, server: str, tool: str | None = None) -> list[dict[str, str]]:
        """Take back the standing answers for `server`'s `tool` (every tool
        of it with None): its calls are asked again. Returns what went."""
        gone = [
            row
            for row in self.grants()
            if row["server"] == server and tool in (None, row["tool"])
        ]
        if not gone:
            return []
        always = self._allowed_always()
        kept = {(s, t) for s, t in always if s != server or tool not in (None, t)}
        if kept != always:
            self._always = kept
            self._save(kept)
        self._session = {
            (c, s, t)
            for c, s, t in self._session
            if s != server or tool not in (None, t)
        }
        logger.info(
            "approvals taken back: %s",
            ", ".join(f"{r['server']}.{r['tool']} ({r['scope']})" for r in gone),
        )
        return gone

    def answer(self, approval: str, verdict: str, scope: str, by: str) -> ApprovalAsked:
        """The user's answer to the question `approval`.

        Raises:
            KeyError: No call waits under that id (answered, or ended).
            ValueError: A verdict other than allow/deny, or an unknown scope.
        """
        if verdict not in ("allow", "deny"):
            raise ValueError(f"verdict must be allow or deny, got {verdict!r}")
        if scope not in SCOPES or (verdict == "deny" and scope != "once"):
            raise ValueError(
                f"scope must be one of {', '.join(SCOPES)} (a deny is for this call "
                f"only), got {scope!r}"
            )
        waiting = self._waiting[approval]
        asked = waiting.asked
        waiting.verdict, waiting.by, waiting.scope = verdict, by, scope
        if verdict == "allow" and scope == "session":
            self._session.add((asked.client, asked.name, asked.tool))
        elif verdict == "allow" and scope == "always":
            always = self._allowed_always()
            always.add((asked.name, asked.tool))
            self._save(always)
        waiting.done.set()
        if verdict == "allow" and scope != "once":
            # The same question from other calls waiting is answered too.
            for other in list(self._waiting.values()):
                same = (other.asked.name, other.asked.tool) == (asked.name, asked.tool)
                if (
                    same
                    and other is not waiting
                    and (scope == "always" or other.asked.client == asked.client)
                ):
                    other.verdict, other.by, other.scope = verdict, by, scope
                    other.done.set()
        return asked

    def _decided(
        self,
        server: str,
        tool: str,
        who: Caller,
        verdict: str,
        by: str,
        scope: str = "once",
    ) -> None:
        self._publish(
            ApprovalDecided(
                name=server,
                tool=tool,
                verdict=verdict,
                by=by,
                scope=scope,
                client=redact(who.client, self._secrets),
            )
        )

    def _shown(self, arguments: Mapping[str, object]) -> str:
        shown = masked(arguments, self._secrets)
        text = json.dumps(shown, ensure_ascii=False, default=str, sort_keys=True)
        if len(text) > _ARGUMENTS_SHOWN:
            text = text[:_ARGUMENTS_SHOWN] + f"... ({len(text)} characters)"
        return text

    def _allowed_always(self) -> set[tuple[str, str]]:
        if self._always is None:
            self._always = set()
            try:
                data = json.loads(self._path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                data = {}
            except (OSError, ValueError) as exc:
                logger.warning(
                    "%s is unreadable (%s): nothing is allowed always", self._path, exc
                )
                data = {}
            for row in data.get("always", []) if isinstance(data, dict) else []:
                if (
                    isinstance(row, dict)
                    and isinstance(row.get("server"), str)
                    and isinstance(row.get("tool"), str)
                ):
                    self._always.add((row["server"], row["tool"]))
        return self._always

    def _save(self, always: set[tuple[str, str]]) -> None:
        rows = [{"server": s, "tool": t} for s, t in sorted(always)]
        try:
            write_private_json(self._path, {"always": rows}, indent=2)
        except OSError as exc:
            logger.warning(
                "could not keep %s (%s): allowed until the daemon stops",
                self._path,
                exc,
            )


class _Lazy(Mapping[str, object]):
    """A tool's annotations, found only when a rule reads them."""

    __slots__ = ("_get", "_got")

    def __init__(self, get: Callable[[], Mapping[str, object]]) -> None:
        self._get = get
        self._got: Mapping[str, object] | None = None

    def _value(self) -> Mapping[str, object]:
        if self._got is None:
            self._got = self._get()
        return self._got

    def __getitem__(self, key: str) -> object:
        return self._value()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._value())

    def __len__(self) -> int:
        return len(self._value())
