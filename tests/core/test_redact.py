"""Tests for manager.core.redact: secrets masked by key and by value."""

from __future__ import annotations

import pytest

from manager.core.redact import (
    MASK,
    MIN_SECRET_LENGTH,
    SecretRegistry,
    is_sensitive_key,
    redact,
    redact_args,
    redact_url,
)


def registry(*values: str) -> SecretRegistry:
    reg = SecretRegistry()
    reg.add(values)
    return reg


# --------------------------------------------------------------------- by key


@pytest.mark.parametrize(
    "key",
    [
        "Authorization",
        "authorization",
        "Proxy-Authorization",
        "X-Api-Key",
        "api_key",
        "--api-key",
        "GITHUB_TOKEN",
        "access_token",
        "--token",
        "client_secret",
        "PASSWORD",
        "db_passwd",
        "PGPWD",
        "Cookie",
        "Set-Cookie",
        "AWS_CREDENTIALS",
    ],
)
def test_sensitive_looking_names_are_recognised(key: str) -> None:
    assert is_sensitive_key(key)


@pytest.mark.parametrize(
    "key", ["Accept", "Content-Type", "PATH", "--port", "user", "host", "-v"]
)
def test_ordinary_names_are_not_sensitive(key: str) -> None:
    assert not is_sensitive_key(key)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--token=abc"], ["--token=***"]),
        (["-apikey=abc"], ["-apikey=***"]),
        (["-k=abc"], ["-k=abc"]),
        (["--api-key", "abc", "next"], ["--api-key", "***", "next"]),
        (["--password", "--verbose"], ["--password", "--verbose"]),
        (["--token=a", "b"], ["--token=***", "b"]),
        (["--port", "8080", "--port=9"], ["--port", "8080", "--port=9"]),
        (["-e", "GITHUB_TOKEN=ghp_x"], ["-e", "GITHUB_TOKEN=***"]),
        (["-e", "LOG_LEVEL=debug"], ["-e", "LOG_LEVEL=debug"]),
        (
            ["--header", "Authorization: Bearer abc"],
            ["--header", "Authorization: ***"],
        ),
        (["--header", "Accept: text/plain"], ["--header", "Accept: text/plain"]),
        (["https://u:pw@h/x?token=t&a=1"], ["https://u:***@h/x?token=***&a=1"]),
        (["--token=line1\nline2"], ["--token=***"]),
        ([], []),
    ],
)
def test_redact_args_masks_values_of_sensitive_flags(
    args: list[str], expected: list[str]
) -> None:
    assert redact_args(args) == expected


# ------------------------------------------------------------------------ URLs


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://h/mcp", "http://h/mcp"),
        ("https://user:pw@h:8443/mcp", "https://user:***@h:8443/mcp"),
        ("https://:pw@h/mcp", "https://:***@h/mcp"),
        ("https://user@h/mcp", "https://user@h/mcp"),
        ("https://u:p@ss:w@rd@h/", "https://u:***@h/"),
        ("http://h/mcp?api_key=abc&x=1", "http://h/mcp?api_key=***&x=1"),
        ("http://h/?Token=abc&TOKEN=def", "http://h/?Token=***&TOKEN=***"),
        ("http://h/?access_token=abc#frag", "http://h/?access_token=***#frag"),
        ("http://h/?password=", "http://h/?password=***"),
        ("http://u:pw@[::1/x", "http://u:***@[::1/x"),
    ],
)
def test_redact_url_masks_the_password_and_sensitive_query_values(
    url: str, expected: str
) -> None:
    assert redact_url(url) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "connect to https://bob:hunter2@h/x failed",
            "connect to https://bob:***@h/x failed",
        ),
        ("two: a://u:p1@h1 b://v:p2@h2", "two: a://u:***@h1 b://v:***@h2"),
        ("mail bob@example.com", "mail bob@example.com"),
        ("https://bob@h/x", "https://bob@h/x"),
    ],
)
def test_redact_masks_url_passwords_in_free_text(text: str, expected: str) -> None:
    assert redact(text, SecretRegistry()) == expected


# ---------------------------------------------------------------------- by value


def test_registered_values_are_masked_wherever_they_appear() -> None:
    reg = registry("sk-live-123", "hunter22")
    text = "error: token sk-live-123 rejected; tried hunter22 and sk-live-123x"
    assert reg.redact(text) == "error: token *** rejected; tried *** and ***x"


@pytest.mark.parametrize("value", ["", "a", "ab", "abc"])
def test_values_shorter_than_the_minimum_are_not_masked_by_value(value: str) -> None:
    assert len(value) < MIN_SECRET_LENGTH
    reg = registry(value)
    assert len(reg) == 0
    assert value not in reg
    assert reg.redact(f"x{value}y {value}") == f"x{value}y {value}"


def test_a_value_of_exactly_the_minimum_length_is_masked() -> None:
    value = "w" * MIN_SECRET_LENGTH
    assert registry(value).redact(f"<{value}>") == f"<{MASK}>"


def test_longer_secrets_are_masked_before_their_prefixes() -> None:
    reg = registry("abcd", "abcdefgh", "efgh")
    assert reg.redact("abcdefgh") == MASK
    assert reg.redact("abcd efgh") == f"{MASK} {MASK}"


def test_longest_first_holds_whatever_the_registration_order() -> None:
    reg = SecretRegistry()
    reg.add(["tok-1"])
    reg.add(["tok-1-extended"])
    assert reg.redact("tok-1-extended") == MASK


def test_regex_metacharacters_in_secrets_are_taken_literally() -> None:
    reg = registry("a.b*c(d)", "x+y?z")
    assert reg.redact("a.b*c(d) axbbc(d) x+y?z xyz") == "*** axbbc(d) *** xyz"


def test_registering_the_same_value_twice_is_harmless() -> None:
    reg = registry("same-value")
    reg.add(["same-value"])
    assert len(reg) == 1
    assert reg.redact("same-value") == MASK


def test_an_empty_registry_leaves_text_alone() -> None:
    assert SecretRegistry().redact("nothing to hide") == "nothing to hide"
    assert registry("secret-xyz").redact("") == ""


def test_redact_uses_only_the_registry_it_is_given() -> None:
    assert redact("only-here-secret-e1f9", SecretRegistry()) == (
        "only-here-secret-e1f9"
    )
    assert redact("only-here-secret-e1f9", registry("only-here-secret-e1f9")) == MASK
    assert redact("only-here-secret-e1f9 at https://u:pw@h/", None) == (
        "only-here-secret-e1f9 at https://u:***@h/"
    )


def test_redact_with_a_registry_masks_its_values_and_url_passwords() -> None:
    reg = registry("value-7c2a")
    text = "value-7c2a at https://u:pw-9@h/"
    assert redact(text, reg) == "*** at https://u:***@h/"


def test_redact_args_and_redact_url_mask_the_given_secrets() -> None:
    reg = registry("arg-secret-5d21")
    assert redact_args(["--x", "arg-secret-5d21"], reg) == ["--x", MASK]
    assert redact_url("http://h/arg-secret-5d21", reg) == f"http://h/{MASK}"
    assert redact_args(["--x", "arg-secret-5d21"]) == ["--x", "arg-secret-5d21"]
