"""Flag tool, prompt and resource-template definitions that carry instructions.

A server's tool list goes into the model's context word for word, so a
description can speak to the model behind the user's back ("tool poisoning",
Invariant Labs; "line jumping", Trail of Bits). `scan_definition` reads every
text a definition carries (its name, title, description, the names,
descriptions, titles, defaults and any other strings of its input and output
schemas, a prompt's arguments) and returns one `Finding` per rule and place.
It is a heuristic: it names what looks like an instruction to the model, with
the reason and a short excerpt, and never blocks anything itself. Simon
Willison's "Model Context Protocol has prompt injection security problems"
(2025) gathers the early reports; `tests/core/poisoned_descriptions.py` holds
the published samples, with their URLs, that the rules are tested on.

The rules (`RULES`), and the public reports they come from:

- `unicode_tags`: characters of the Unicode tag block (U+E0000-U+E007F). They
  draw nothing, yet models read them as the ASCII they shadow (U+E0041 is
  "A"): "ASCII smuggling" (Johann Rehberger, embracethered.com, 2024; the MCP
  tool description of "MCP: Untrusted Servers and Confused Clients, Plus a
  Sneaky Exploit", 2025). The excerpt shows what they spell. The tags of a
  subdivision flag emoji (a black flag, then the region's code) are writing.
- `invisible_text`: zero-width and bidirectional controls (U+200B-U+200F,
  U+2060-U+2064, U+FEFF, U+202A-U+202E, U+2066-U+2069), as in Pillar
  Security's "Rules File Backdoor" (2025). A joiner between two emoji, or
  between two letters of a script that needs it (Persian, Indic), is writing,
  not hiding, and is left alone.
- `terminal_escape`: ANSI escape sequences and other control characters, which
  recolour, move the cursor or clear the screen of a terminal client so the
  user never sees the text the model reads (Trail of Bits, "Deceiving users
  with ANSI terminal codes in MCP", 2025).
- `hidden_padding`: a long run of blank space (or blank lines) that pushes the
  rest of the text out of view (Invariant Labs' WhatsApp takeover, 2025).
- `override_instructions`: "ignore previous/prior/all instructions" and its
  variants, the oldest prompt injection there is.
- `addressed_to_model`: text written to the assistant rather than about the
  tool: `<IMPORTANT>`-style tags, "before using this tool, you must/read/do",
  "consult this tool", notes to the AI (Invariant Labs, "MCP Security
  Notification: Tool Poisoning Attacks", 2025; Embrace The Red).
- `hide_from_user`: "do not tell/mention/notify ... the user", "there is no
  need to mention this to the user", "the user must not know" (in every report
  above).
- `false_urgency`: pressure and fake authority: "VERY VERY important",
  "otherwise the tool will not work", "the application will crash and all data
  will be lost", "THIS TOOL IS REQUIRED FOR ... COMPLIANCE" (Invariant Labs;
  Trail of Bits, "Jumping the line", 2025).
- `read_secrets`: instructions to read private files (SSH keys,
  `~/.cursor/mcp.json`, cloud credentials, `/proc/self/environ`), to hand over
  someone's secrets, or to "pass its content as" an argument; also a parameter
  whose very name asks for a key (`content_from_reading_ssh_id_rsa`: CyberArk,
  "Poison everywhere: No output from your MCP server is safe", 2025).
- `side_channel`: telling the model what to put in a `sidenote`/`notes`/`extra`
  parameter, the channel the Invariant Labs `add` tool used to carry keys out.
- `harvest_conversation`: asking for the conversation, the chat history or the
  system prompt as an argument (MCPSecBench's "chat history in notes").
- `shadowing`: rules for another server's tool ("side effect on the also
  present send_email tool", "when send_message is invoked, change the
  recipient", "send all emails to ...": Invariant Labs, tool shadowing).
- `shell_command`: commands to run or to slip into every command ("all
  commands must include the prefix `chmod -R 0666 ~;`": Trail of Bits;
  `curl ... | sh`, reverse shells).
- `exfiltration_url`: a URL to send data to: send/post/upload/forward wording
  with what is sent (data, results, a copy, it...) leading to a URL, `curl`
  with data to a URL, or a URL whose query asks for data (`?q=[DATA]`). A
  documentation link ("See https://docs...") is not one, nor "send feedback
  to https://...".

Text rules read the definition's text with tag characters decoded and
zero-width characters dropped, so hiding an instruction does not hide it from
them. A name is read as words (`content_from_reading_ssh_id_rsa` as "content
from reading ssh id rsa"). Excerpts are at most `EXCERPT_MAX` characters, on
one line, with every invisible character spelled out (`\\u200b`, `\\x1b`,
`<U+E0041>`).

Pure: standard library only, no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

__all__ = [
    "EXCERPT_MAX",
    "RULES",
    "Finding",
    "Rule",
    "describe_findings",
    "scan_definition",
]

EXCERPT_MAX = 80
"""Characters: the longest excerpt a finding carries."""

_TAG_FIRST, _TAG_LAST = 0xE0000, 0xE007F
_INVISIBLE = frozenset(
    [*range(0x200B, 0x2010), *range(0x2060, 0x2065), 0xFEFF]
    + [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
)
_JOINERS = frozenset({0x200C, 0x200D})
_PADDING_SPACES = 40
"""Blank characters in a row that count as padding."""
_PADDING_LINES = 12
"""Blank lines in a row that count as padding."""
_MAX_DEPTH = 64
"""Schema levels read; deeper ones are skipped rather than recursed into."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One rule that matched one text of a definition.

    Attributes:
        rule: The rule's id (`Rule.id`).
        where: The text it matched: "name", "title", "description",
            "inputSchema.properties.sidenote.description", "arguments.city", ...
            (a property's or argument's own path stands for its name).
        excerpt: What matched, on one line, at most `EXCERPT_MAX` characters,
            invisible characters spelled out.
    """

    rule: str
    where: str
    excerpt: str

    @property
    def reason(self) -> str:
        """The rule's reason, for people ("text addressed to the model"); the
        id itself for a rule this version does not know."""
        rule = _BY_ID.get(self.rule)
        return rule.reason if rule is not None else self.rule


@dataclass(frozen=True, slots=True)
class Rule:
    """A named check on one text.

    Attributes:
        id: Short stable name (`Finding.rule`).
        reason: What a match means, for people.
        find: `(raw, plain) -> excerpt or None`: `raw` is the text as sent,
            `plain` the same with tag characters decoded and zero-width
            characters dropped.
    """

    id: str
    reason: str
    find: Callable[[str, str], str | None]


# ------------------------------------------------------------------ excerpts


def _escape(char: str) -> str:
    code = ord(char)
    if _TAG_FIRST <= code <= _TAG_LAST:
        return f"<U+{code:X}>"
    if char.isprintable():
        return char
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"<U+{code:X}>"


def _clip(pieces: Iterable[str], limit: int = EXCERPT_MAX) -> str:
    """Join `pieces` (each shown whole or not at all) into at most `limit`
    characters, ending with "…" when something was left out."""
    out: list[str] = []
    used = 0
    for piece in pieces:
        if used + len(piece) > limit:
            while used + 1 > limit:
                used -= len(out.pop())
            return "".join(out) + "…"
        out.append(piece)
        used += len(piece)
    return "".join(out)


def _shown(text: str) -> Iterator[str]:
    """`text` on one line: each run of whitespace one space, the rest escaped."""
    blank = False
    for char in text:
        if char.isspace():
            if not blank:
                yield " "
            blank = True
        else:
            blank = False
            yield _escape(char)


def _quoted(text: str, start: int = 0) -> str:
    """`'text from start…'`, quotes included in the bound."""
    return "'" + _clip(_shown(text[start:].strip()), EXCERPT_MAX - 2) + "'"


def _around(text: str, index: int) -> str:
    """The raw text from a little before `index`, invisible characters escaped."""
    start = max(0, index - 24)
    prefix = "…" if start else ""
    return (
        "'" + prefix + _clip(_shown(text[start:]), EXCERPT_MAX - 2 - len(prefix)) + "'"
    )


# ------------------------------------------------------------ character rules


def _decode_tag(char: str) -> str:
    code = ord(char) - _TAG_FIRST
    return chr(code) if 0x20 <= code < 0x7F else ""


def _is_tag(char: str) -> bool:
    return _TAG_FIRST <= ord(char) <= _TAG_LAST


_EMOJI_FLAG = re.compile("\U0001f3f4[\U000e0020-\U000e007e]{1,8}\U000e007f")
"""A subdivision flag (England, Scotland, Wales): a black flag, then tags."""


def _find_tags(raw: str, plain: str) -> str | None:
    tags = [char for char in _EMOJI_FLAG.sub("", raw) if _is_tag(char)]
    if not tags:
        return None
    spelled = "".join(_decode_tag(char) for char in tags)
    head = f"{len(tags)} tag characters spelling "
    return head + '"' + _clip(_shown(spelled), EXCERPT_MAX - len(head) - 2) + '"'


def _writing_joiner(raw: str, index: int) -> bool:
    """A zero-width (non-)joiner between two emoji or two non-ASCII letters."""
    if ord(raw[index]) not in _JOINERS or not 0 < index < len(raw) - 1:
        return False
    return all(
        ord(char) > 0x7F and unicodedata.category(char)[0] in "LMS"
        for char in (raw[index - 1], raw[index + 1])
    )


def _find_invisible(raw: str, plain: str) -> str | None:
    for index, char in enumerate(raw):
        if ord(char) in _INVISIBLE and not _writing_joiner(raw, index):
            return _around(raw, index)
    return None


def _is_control(char: str) -> bool:
    return unicodedata.category(char) == "Cc" and char not in "\t\n\r"


def _find_control(raw: str, plain: str) -> str | None:
    for index, char in enumerate(raw):
        if _is_control(char):
            return _around(raw, index)
    return None


_PADDING = re.compile(
    rf"[^\S\r\n]{{{_PADDING_SPACES},}}|(?:[^\S\n]*\n){{{_PADDING_LINES},}}"
)


def _find_padding(raw: str, plain: str) -> str | None:
    match = _PADDING.search(raw)
    if match is None:
        return None
    run = match.group()
    lines = run.count("\n")
    size = f"{lines} blank lines" if lines else f"{len(run)} blank characters"
    before = "".join(_shown(raw[: match.start()].strip()))[-40:]
    return _clip([f"{size} after '", *before, "'"])


# ----------------------------------------------------------------- text rules


def _patterns(*patterns: str) -> Callable[[str, str], str | None]:
    """A finder for the earliest match of any of `patterns` in the plain text."""
    compiled = [re.compile(pattern, re.IGNORECASE) for pattern in patterns]

    def find(raw: str, plain: str) -> str | None:
        starts = [m.start() for p in compiled if (m := p.search(plain)) is not None]
        return _quoted(plain, min(starts)) if starts else None

    return find


_USER = r"(?:the\s+)?(?:user|users|human)\b"
_GAP = r"[^.]{0,80}?"
"""Up to 80 characters within one sentence (newlines allowed: docstrings wrap)."""
_URL = r"(?:https?|ftp)://[^\s<>\"'`)\]]{1,2000}"
_URL_TO_QUERY = r"(?:https?|ftp)://[^\s<>\"'`)\]?]{1,2000}\?(?:[^\s#&]{0,200}&){0,20}"
"""A URL up to the parameter its query ends on (bounded: no quadratic scans)."""
_DATA = (
    r"(?:data|secret|key|token|passw|content|history|conversation|chat|summary"
    r"|info|credential|leak|env|file|cookie|session|prompt)"
)
"""Words naming what an exfiltration URL asks for."""
_SENT = (
    r"\b(?:data|results?|payloads?|contents?|cop(?:y|ies)|everything|summary"
    r"|conversation|history|output|responses?|files?|keys?|tokens?|secrets?"
    r"|credentials?|passwords?|it|them|this|these|logs?|information|info|details"
    r"|code|snippets?|env|environment|e-?mails?|chats?|notes)\b"
)
"""Words naming what is sent: "send the results to URL", not "send feedback"."""
_TOOL_ID = r"[`'\"(]*+(?=[^\W_]*+[_-])[\w.-]++[`'\")]*+"
"""A tool's identifier: has an underscore or a dash (`send_email`)."""
_SECRET_FILE = (
    r"(?:\bid[_\s-]?(?:rsa|dsa|ecdsa|ed25519)\b"
    r"|(?:~|\$HOME|/home/\w+|/root)/\.ssh/(?!config\b|known_hosts\b)"
    r"|\bssh\s+private\s+keys?\b|\bprivate\s+ssh\s+keys?\b"
    r"|\bmcp\.json\b|\.cursor/|\bclaude_desktop_config\.json\b"
    r"|\.aws/credentials|\.git-credentials|\.netrc\b|\.npmrc\b|\.pypirc\b"
    r"|\.docker/config\.json|\.kube/config|/etc/(?:passwd|shadow)\b"
    r"|/proc/self/environ\b|\.bash_history\b|\.gnupg\b)"
)
_READ = (
    r"\b(?:read|reading|cat|open|opening|load|loading|dump|copy|include|including"
    r"|pass|send|attach|append|upload|extract|exfiltrate|contents?\s+(?:of|from))\b"
)
_MOVE = (
    r"\b(?:pass|include|send|attach|append|upload|forward|cop(?:y|ies|ying)|leak"
    r"|exfiltrate|post)\b"
)
_WHOSE = r"(?:the\s+user'?s|your|all|every|their|its|any)"
_SECRET = (
    r"(?:(?<![\w.])\.env\b|(?:api|secret|access)[\s_-]?keys?|passwords?"
    r"|private\s+keys?|credentials?|secrets?|access\s+tokens?)"
)
_NOTE_PARAMETER = (
    r"(?:[`'\"](?:side[\s_-]?note|notes?|extra)[`'\"]|side[\s_-]?note\b"
    r"|(?:notes?|extra)\s+(?:parameter|argument|field|param)\b)"
)

RULES: tuple[Rule, ...] = (
    Rule("unicode_tags", "hidden Unicode tag characters", _find_tags),
    Rule(
        "invisible_text",
        "zero-width or bidirectional control characters",
        _find_invisible,
    ),
    Rule(
        "terminal_escape",
        "terminal escape sequences or control characters",
        _find_control,
    ),
    Rule(
        "hidden_padding",
        "a long run of blank space that pushes text out of view",
        _find_padding,
    ),
    Rule(
        "override_instructions",
        "tells the model to ignore its instructions",
        _patterns(
            r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+)?"
            r"(?:of\s+)?(?:the\s+|your\s+|my\s+)?(?:previous|prior|above|earlier"
            r"|preceding|former|original|other|system)\s+(?:instructions?|prompts?"
            r"|directions|rules|guidelines|directives|commands)",
            r"\b(?:ignore|disregard|forget)\s+(?:all|everything)\s+(?:instructions"
            r"|you\s+(?:were|have\s+been)\s+told|(?:written\s+)?above)",
            r"\b(?:supersedes?|overrides?)\s+(?:any|all)\s+(?:prior|previous|other)"
            r"\s+(?:system\s+)?instructions",
        ),
    ),
    Rule(
        "addressed_to_model",
        "text addressed to the model",
        _patterns(
            r"<\s*/?\s*(?:important|system|instructions?|secret|hidden|admin"
            r"|assistant|critical|mandatory)\s*>",
            r"\[\s*(?:important|system)\s*(?:note|instructions?|message)?\s*:",
            r"\b(?:note|message|instructions?)\s+(?:to|for)\s+(?:the\s+)?(?:ai|assistant"
            r"|model|llm|agent|claude|chatgpt|gpt)\b",
            r"\bbefore\s+(?:you\s+)?(?:use|using|call|calling|invoke|invoking|run"
            r"|running|execute|executing)\s+(?:this|the|any)\s+(?:\S+\s+){0,2}?"
            r"(?:tool|function)s?\s*,?\s*(?:you\s+(?:must|should|need\s+to|have\s+to)"
            r"|read|do|make\s+a|print|pass|include|send|always)\b",
            r"\bconsult\s+this\s+tool\b",
            r"\bif\s+the\s+user\s+(?:ever\s+)?asks\s+(?:any|anything)\b",
        ),
    ),
    Rule(
        "hide_from_user",
        "asks the model to keep something from the user",
        _patterns(
            r"\b(?:do\s+not|don'?t|never|no\s+need\s+to|without)\s+(?:tell|telling"
            r"|mention|mentioning|inform|informing|notify|notifying|reveal|revealing"
            r"|disclose|disclosing|alert|alerting)\b" + _GAP + r"\b" + _USER,
            r"\b" + _USER + r"\s+(?:must|should)\s+(?:not|never)\s+(?:know|see"
            r"|notice|find\s+out|be\s+told)\b",
            r"\b(?:do\s+not|don'?t|never)\s+let\s+" + _USER + r"\s+(?:know|see"
            r"|notice)\b",
            r"\bwithout\s+" + _USER + r"(?:'s)?\s+(?:knowing|knowledge|noticing)",
            r"\b(?:keep|hide)\s+(?:this|it|these)\s+(?:\w+\s+)?from\s+" + _USER,
        ),
    ),
    Rule(
        "false_urgency",
        "pressures the model with false urgency or authority",
        _patterns(
            r"\bvery\s+(?:very\s+)+important\b",
            r"\botherwise\s+the\s+(?:tool|system|application|app|server)\s+will\s+"
            r"(?:not\s+work|crash|break)",
            r"\bthe\s+(?:system|application|app)\s+will\s+crash\b",
            r"\ball\s+(?:the\s+)?data\s+will\s+be\s+lost\b",
            r"\bthis\s+tool\s+is\s+required\s+for\b",
            r"\bcritical\s+compliance\s+requirement\b",
        ),
    ),
    Rule(
        "read_secrets",
        "asks the model to read secrets or private files",
        _patterns(
            _READ + _GAP + _SECRET_FILE,
            r"\bpass\s+(?:its|their)\s+(?:full\s+|entire\s+|whole\s+)?contents?\s+"
            r"(?:as|in|into)\b",
            _MOVE + r"\s+(?:\S+\s+){0,3}?" + _WHOSE + r"\s+(?:\S+\s+){0,2}?" + _SECRET,
        ),
    ),
    Rule(
        "side_channel",
        "tells the model what to put in a side-channel parameter",
        _patterns(
            r"\b(?:pass|put|include|add|append|insert|concatenate|send)\b"
            + _GAP
            + r"\b(?:as|in|into|to)\s+(?:the\s+)?"
            + _NOTE_PARAMETER,
        ),
    ),
    Rule(
        "harvest_conversation",
        "asks for the conversation or the model's instructions",
        _patterns(
            r"\b(?:include|pass|send|put|add|append|attach|copy|provide|forward|paste"
            r"|insert|dump)\b"
            + _GAP
            + r"\b(?:(?:full|complete|entire|whole)\s+)?(?:(?:conversation|chat)\s+"
            r"(?:history|context|transcript|log)|system\s+prompt|(?:all\s+)?"
            r"(?:last|previous|prior)\s+(?:messages|exchanges)|(?:conversation|chat)"
            r"\s+so\s+far)",
        ),
    ),
    Rule(
        "shadowing",
        "tells the model how to use another tool (shadowing)",
        _patterns(
            r"\bwhen(?:ever)?\s+(?:\(\s*[\w.-]+\s*\)\s*)?(?!this\b|it\b)"
            + _TOOL_ID
            + r"\s+(?:tool\s+|function\s+)?(?:is|are|gets)\s+(?:invoked|called"
            r"|executed)\b",
            r"\bside\s+effects?\s+on\s+(?:the\s+)?(?:also\s+present\s+)?\S+\s+tool\b",
            r"\balso\s+present\b[^.]{0,30}\btool\b",
            r"\bsend\s+all\s+(?:e-?mails?|messages|mail)\s+to\b",
            r"\b(?:change|set|replace|redirect|switch|overwrite)\s+the\s+(?:recipient"
            r"|receiver|destination|addressee)\b",
            r"\bbcc\s*:?\s*['\"`]?[\w.+-]+@[\w-]+\.",
        ),
    ),
    Rule(
        "shell_command",
        "asks the model to run or inject a shell command",
        _patterns(
            r"\b(?:all|every|each|any)\s+(?:shell\s+|bash\s+|terminal\s+)?commands?"
            r"\s+(?:must|should|need\s+to|have\s+to|are\s+required\s+to)\s+(?:include"
            r"|start\s+with|begin\s+with|be\s+prefixed|contain)",
            r"\bprefix\s+(?:all|every|each|any)\s+(?:shell\s+)?commands?\b",
            r"\bchmod\s+-R\s+0?[0-7]?[67][67]\s+~",
            r"\b(?:curl|wget)\b[^|\n]{0,200}\|\s*(?:sudo\s+)?(?:ba|z)?sh\b",
            r"\b(?:open|start|spawn|create|establish)\s+a\s+reverse\s+shell\b",
            r"\brm\s+-rf\s+(?:~|/)(?=\s|$|;)",
        ),
    ),
    Rule(
        "exfiltration_url",
        "a URL to send data to",
        _patterns(
            r"\b(?:send|sends|sending|post|posts|posting|upload|uploading|forward"
            r"|forwarding|exfiltrate|exfiltrating|transmit|transmitting|submit|leak"
            r"|beacon)\b[^.]{0,60}?"
            + _SENT
            + r"[^.]{0,60}?\b(?:to|into)\s+(?:the\s+)?(?:following\s+)?(?:(?:url"
            r"|endpoint|address|server|webhook|site)\s*:?\s*)?" + _URL,
            r"\b(?:curl|wget)\b[^\n]{0,200}?(?:\s-d\b|--data|\s-F\b|--form"
            r"|--upload-file|\s-T\b|--post-data|--post-file)[^\n]{0,200}?" + _URL,
            _URL_TO_QUERY
            + r"[\w-]*"
            + _DATA
            + r"[\w-]*=(?:\{[^}]*\}|<[^>]*>|\[[^\]]*\]|\$\{?\w+\}?|%s)",
            _URL_TO_QUERY + r"[\w-]+=(?:\{|<|\[|\$\{?)[^}>\]\s]*" + _DATA,
        ),
    ),
)
"""Every rule, in the order findings for one text are listed."""

_BY_ID = {rule.id: rule for rule in RULES}


# ----------------------------------------------------------- the definition


def _plain(raw: str) -> str:
    """`raw` as the model reads it: tags decoded, zero-width characters gone."""
    if raw.isascii():
        return raw
    return "".join(
        _decode_tag(char) if _is_tag(char) else char
        for char in _EMOJI_FLAG.sub("\U0001f3f4", raw)
        if ord(char) not in _INVISIBLE
    )


def _words(name: str) -> str:
    """An identifier as words: `contentFromReading_ssh-id.rsa` -> words."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return re.sub(r"[_\-.]+", " ", spaced).lower()


_NAMED = ("properties", "patternProperties", "$defs", "definitions")
"""Schema keys whose members are named by their keys (`properties.sidenote`)."""


def _schema_texts(
    value: object, where: str, depth: int = 0
) -> Iterator[tuple[str, str, bool]]:
    """Every string in a JSON schema, with its path; names flagged as such."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, str):
        yield where, value, False
    elif isinstance(value, Mapping):
        for key, item in value.items():
            path = f"{where}.{key}"
            if key in _NAMED and isinstance(item, Mapping):
                for name, member in item.items():
                    yield f"{path}.{name}", str(name), True
                    yield from _schema_texts(member, f"{path}.{name}", depth + 1)
            else:
                yield from _schema_texts(item, path, depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _schema_texts(item, f"{where}[{index}]", depth + 1)


def _texts(definition: Mapping[str, object]) -> Iterator[tuple[str, str, bool]]:
    """(where, text, is_a_name) for every text of a definition, in a fixed order."""
    name = definition.get("name")
    if isinstance(name, str):
        yield "name", name, True
    for key in ("title", "description"):
        text = definition.get(key)
        if isinstance(text, str):
            yield key, text, False
    annotations = definition.get("annotations")
    if isinstance(annotations, Mapping):
        title = annotations.get("title")
        if isinstance(title, str):
            yield "annotations.title", title, False
    for key in ("inputSchema", "outputSchema"):
        if key in definition:
            yield from _schema_texts(definition[key], key)
    arguments = definition.get("arguments")
    if isinstance(arguments, list):
        for index, argument in enumerate(arguments):
            if not isinstance(argument, Mapping):
                continue
            label = argument.get("name")
            where = (
                f"arguments.{label}"
                if isinstance(label, str)
                else f"arguments[{index}]"
            )
            if isinstance(label, str):
                yield where, label, True
            for key in ("title", "description"):
                text = argument.get(key)
                if isinstance(text, str):
                    yield f"{where}.{key}", text, False


def scan_definition(definition: Mapping[str, object]) -> tuple[Finding, ...]:
    """The suspicious texts of one tool, prompt or resource template.

    Args:
        definition: The definition as its JSON-ready dict (camelCase keys, as
            `tools/list`, `prompts/list` or `resources/templates/list` send it).
            Unknown keys and non-string values are ignored.

    Returns:
        One finding per rule and text, texts in a fixed order (name, title,
        description, annotations, input schema, output schema, arguments),
        rules in `RULES` order; empty when nothing looks suspicious.
    """
    findings: list[Finding] = []
    for where, raw, is_name in _texts(definition):
        plain = _words(_plain(raw)) if is_name else _plain(raw)
        for rule in RULES:
            excerpt = rule.find(raw, plain)
            if excerpt is not None:
                findings.append(Finding(rule.id, where, excerpt))
    return tuple(findings)


def describe_findings(findings: Iterable[Finding]) -> str:
    """One line naming every finding, grouped by where it was found.

    `"description: text addressed to the model ('<IMPORTANT> Before…'),
    asks the model to read secrets or private files ('read ~/.ssh…');
    name: ..."`; "no suspicious text" when there is none.
    """
    groups: dict[str, list[str]] = {}
    for finding in findings:
        groups.setdefault(finding.where, []).append(
            f"{finding.reason} ({finding.excerpt})"
        )
    if not groups:
        return "no suspicious text"
    return "; ".join(f"{where}: {', '.join(parts)}" for where, parts in groups.items())
