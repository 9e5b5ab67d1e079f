"""The ledger server (`ledger.py`) as tests declare and read it.

`ledger_startup` writes a startup.lua that declares it as `ledger` over
stdio, writing to `ledger`; `ledger_lines` reads what it recorded (one line
per call that ran: how often a call ran, and whether it ran at all).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["LEDGER_SCRIPT", "ledger_lines", "ledger_startup"]

LEDGER_SCRIPT = Path(__file__).parent / "ledger.py"


def ledger_startup(tmp_path: Path, ledger: Path, extra: str = "") -> Path:
    """`tmp_path/startup.lua` declaring `ledger`; `extra`: more options."""
    script = tmp_path / "startup.lua"
    args = ", ".join(json.dumps(a) for a in ["-S", str(LEDGER_SCRIPT), str(ledger)])
    script.write_text(
        f"mcp_add('ledger', {{command = {json.dumps(sys.executable)}, "
        f"args = {{{args}}}{extra}}})\n"
    )
    return script


def ledger_lines(ledger: Path) -> list[str]:
    """What the ledger holds, a line per call that ran."""
    return ledger.read_text().splitlines() if ledger.exists() else []
