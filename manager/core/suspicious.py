"""Text in a definition that reads as instructions to the model (placeholder:
the rules land with their corpus)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Finding", "describe_findings", "scan_definition"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One rule that matched: which, where, and a short excerpt."""

    rule: str
    where: str
    excerpt: str


def scan_definition(definition: Mapping[str, object]) -> tuple[Finding, ...]:
    """The findings in one definition (none yet)."""
    return ()


def describe_findings(findings: Sequence[Finding]) -> str:
    """One sentence for the findings ("" for none)."""
    return "; ".join(f"{f.where}: {f.rule} ({f.excerpt})" for f in findings)
