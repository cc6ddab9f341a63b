"""The secrets policy: what is detected, what is not, and reject / redact / allow end to end.

Every credential below is fake and assembled from pieces, so this file holds none verbatim.
"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

import pytest
from anthropic.lib.tools import ToolError
from hypothesis import given, settings
from hypothesis import strategies as st

import gitmem
from gitmem import GitMemoryTool, MemoryStore
from gitmem.secrets import Finding, SecretRefused, changed_span, check_policy, scan, screen

ALNUM = "aB3dE5fG7hJ9kL2mN4pQ6rS8tU0vW1xY"
AWS = "AKIA" + "IOSFODNN7" + "EXAMPLE"
GITHUB = "ghp_" + ALNUM + "Zz99"
ANTHROPIC = "sk-ant-" + "api03-" + ALNUM + "-" + ALNUM
OPENAI = "sk-" + "proj-" + ALNUM
JWT = "eyJ" + "hbGciOiJIUzI1NiJ9" + ".eyJ" + "zdWIiOiIxMjM0NTY3ODkwIn0" + "." + ALNUM[:20]
PEM = (
    "-----BEGIN " + "RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEA1c3xQd8kzj0Y9mB2hN5uVw7rT3pLq6sKxZ0aF4eG1iH2jJ3\n"
    "bm9ub25zZW5zZWJ1dGxvbmdlbm91Z2h0b2xvb2tsaWtlYWtleQ==\n"
    "-----END " + "RSA PRIVATE KEY-----"
)

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
GITHUB_PAT = "github_pat_" + "11ABCDEFG0" + ALNUM
SLACK = "xoxb-" + "2048-1234567890-" + ALNUM[:12]
WEBHOOK = "https://hooks.slack.com/services/" + "T0001/B0001/" + ALNUM[:24]
HEX32 = "9f8e7d6c5b4a3928" + "1706f5e4d3c2b1a0"
KEYISH = "q8Zr2LmX0p" + "Vt7wYbN4kS"

GITMEM_KEY = "gitmem-key-1:" + "wwSbCqvcWAyZXzsG2" + ALNUM[:31]

POSITIVE = [
    # The key file `gitmem init` saves went into memory unflagged with a directory holding it.
    ("gitmem-key", f"{GITMEM_KEY}\n", GITMEM_KEY),
    ("aws-access-key", f"deploy with {AWS} today", AWS),
    ("aws-secret-key", f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
    ("github-token", f"git remote token {GITHUB}", GITHUB),
    ("github-token", f"GH_TOKEN={GITHUB_PAT}", GITHUB_PAT),
    ("gitlab-token", "glpat-" + ALNUM[:20], "glpat-" + ALNUM[:20]),
    ("slack-token", f"bot: {SLACK}", SLACK),
    ("slack-webhook", f"alerts go to {WEBHOOK}", WEBHOOK),
    ("stripe-key", "sk_" + "live_" + ALNUM[:24], "sk_live_" + ALNUM[:24]),
    ("anthropic-key", f"ANTHROPIC_API_KEY={ANTHROPIC}", ANTHROPIC),
    ("openai-key", f"use {OPENAI} for evals", OPENAI),
    ("google-api-key", "AIza" + ALNUM + "abc", "AIza" + ALNUM + "abc"),
    ("npm-token", "npm_" + ALNUM + "1234", "npm_" + ALNUM + "1234"),
    ("huggingface-token", "hf_" + ALNUM + "xyz", "hf_" + ALNUM + "xyz"),
    ("jwt", f"session cookie: {JWT}", JWT),
    ("private-key", f"key:\n{PEM}\nend", PEM),
    ("url-password", "db: postgres://admin:" + "S3cr3tPass@db.internal:5432/app", "S3cr3tPass"),
    ("authorization", f"curl -H 'Authorization: Bearer {ALNUM}'", ALNUM),
    ("authorization", "Authorization: Basic " + "dXNlcjpwYXNz", "dXNlcjpwYXNz"),
    ("password", "DB_PASSWORD=" + "Summer2024!", "Summer2024!"),
    ("password", 'password: "' + 'hunter2-hunter2"', "hunter2-hunter2"),
    ("secret", f'api_key = "{KEYISH}"', KEYISH),
    ("secret", f"**API key**: `{KEYISH}`", KEYISH),
    ("secret", f'{{"client_secret": "{HEX32}"}}', HEX32),
    ("secret", "SIGNING_KEY: " + "Zm9vYmFyYmF6cXV4MTIzNDU2", "Zm9vYmFyYmF6cXV4MTIzNDU2"),
]


@pytest.mark.parametrize(("kind", "text", "secret"), POSITIVE)
def test_detects(kind: str, text: str, secret: str) -> None:
    found = scan(text)
    assert [(f.kind, f.line) for f in found] == [(kind, 1 + text[: text.index(secret)].count("\n"))]
    assert text[found[0].start : found[0].end] == secret


NOTES = """\
# Project memory
## Progress log
- [x] Feature 12: login works end to end (commit 3f786850e387550fdab836ed7e6dc881de23001b)
- [ ] Feature 13: password reset flow (blocked: see ticket OPS-1234)
- Key decision: use the token bucket limiter; max_tokens = 1024, token budget: 200000 tokens
- Run id 123e4567-e89b-12d3-a456-426614174000 was flaky
- sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
- The fixture header is dGhpcyBpcyBqdXN0IGEgdGVzdCBzdHJpbmc= (base64 of a sentence)
- password: see the team vault (1Password, entry 'prod db')
- password: "the one from the 2023 onboarding doc"; passphrase = 'ask ops-42'
- API key: stored in the ANTHROPIC_API_KEY environment variable, never here
- api_key: ${ANTHROPIC_API_KEY}; password = os.environ.get('DB_PASSWORD')
- secret: none stored here. token: expires after 30 minutes
- pwd: /home/claude/work/project-2024
- Docs: https://docs.example.com:8443/a@b; clone git@github.com:org/repo.git
- Connection string template: postgres://user:password@localhost/db or redis://:<pass>@cache
- Start-up script: `./init.sh --port 8080 --log-level=debug`
- Keys in the config are named like `settings.API_KEY_V2`; rotate the signing key yearly
- The risk-assessment-2024-q1-final document and task-force notes are in /docs
- Monkey test: monkey_key = banana; authorization: basic auth is disabled
- A PEM file starts with -----BEGIN PRIVATE KEY----- and nothing else here.
"""


def test_ordinary_notes_are_not_flagged() -> None:
    assert scan(NOTES) == []


@settings(max_examples=200, deadline=None)
@given(
    st.binary(min_size=16, max_size=48),
    st.sampled_from(["hex", "uuid", "base64"]),
    st.sampled_from(["commit {}", "- run {} was flaky", "id: {}", "see `{}` in the log", "{}"]),
)
def test_random_ids_in_notes_are_not_flagged(raw: bytes, form: str, template: str) -> None:
    # No token prefix can be spelled in these alphabets, so any finding is a false positive.
    value = {
        "hex": raw.hex(),
        "uuid": str(uuid.UUID(bytes=raw[:16])),
        "base64": base64.b64encode(raw).decode(),
    }[form]
    assert scan(template.format(value)) == []


def test_finds_several_in_order_with_lines() -> None:
    text = f"first\n{AWS}\nthird {GITHUB} and {AWS}\n"
    assert [(f.kind, f.line) for f in scan(text)] == [
        ("aws-access-key", 2),
        ("github-token", 3),
        ("aws-access-key", 3),
    ]


def test_changed_span() -> None:
    assert changed_span("", "abc") == (0, 3)
    assert changed_span("hello world", "hello brave world") == (6, 12)
    assert changed_span("aaaa", "aaaaa") == (4, 5)
    assert changed_span("abcdef", "abef") == (2, 2)
    assert changed_span("same", "same") == (4, 4)


def test_policy_names() -> None:
    assert check_policy("redact") == "redact"
    with pytest.raises(gitmem.UsageError) as info:
        check_policy("strip")
    assert str(info.value) == "secrets must be one of reject, redact, allow, not 'strip'"


def test_screen_only_judges_what_the_write_changed() -> None:
    before = f"old note with {AWS}\n"
    after = before + "a new line\n"
    assert screen(before, after, "reject").text == after
    with pytest.raises(SecretRefused):
        screen(before, after + GITHUB, "reject")
    # Joining two harmless halves into a key is caught too.
    half = f"{AWS[:10]} {AWS[10:]}"
    with pytest.raises(SecretRefused):
        screen(half, AWS, "reject")


# -- through the tool -----------------------------------------------------------------------------


def make_tool(repo: Path, key: str, policy: str) -> GitMemoryTool:
    return GitMemoryTool(repo, key=key, session="secrets", secrets=policy)  # type: ignore[arg-type]


def refused(tool: GitMemoryTool, **command: object) -> str:
    head = tool.store.head()
    with pytest.raises(ToolError) as info:
        tool.call(command)
    assert tool.store.head() == head, "a refused write moved HEAD"
    return str(info.value.content)


def test_reject_is_the_default(tool: GitMemoryTool) -> None:
    assert tool.store.secrets == "reject"
    text = f"# creds\nnothing\n{AWS}\n"
    message = refused(tool, command="create", path="/memories/c.md", file_text=text)
    assert message == (
        "Error: refused to store what looks like an AWS access key (line 3). Memory must not "
        "hold credentials; remove it and try again."
    )
    assert AWS not in message
    assert tool.store.head() is None


def test_reject_names_every_kind(tool: GitMemoryTool) -> None:
    text = f"{GITHUB}\nok\nrepo: postgres://u:Xy7pQ9zzR2@h/db\n{GITHUB}\n"
    message = refused(tool, command="create", path="/memories/c.md", file_text=text)
    assert message == (
        "Error: refused to store what looks like a GitHub token (lines 1, 4) and a password in "
        "a URL (line 3). Memory must not hold credentials; remove them and try again."
    )


def test_reject_str_replace_and_insert(tool: GitMemoryTool) -> None:
    tool.call({"command": "create", "path": "/memories/n.md", "file_text": "a\nb\nc\n"})
    message = refused(
        tool, command="str_replace", path="/memories/n.md", old_str="b", new_str=f"key {JWT}"
    )
    assert message == (
        "Error: refused to store what looks like a JSON Web Token (line 2). Memory must not "
        "hold credentials; remove it and try again."
    )
    message = refused(tool, command="insert", path="/memories/n.md", insert_line=3, insert_text=PEM)
    assert message == (
        "Error: refused to store what looks like a private key (line 4). Memory must not hold "
        "credentials; remove it and try again."
    )
    assert tool.store.read_text(gitmem.parse_path("/memories/n.md")) == "a\nb\nc\n"


def test_existing_secret_does_not_block_other_edits(repo_path: Path, key: str) -> None:
    make_tool(repo_path, key, "allow").call(
        {"command": "create", "path": "/memories/n.md", "file_text": f"legacy {AWS}\ntodo\n"}
    )
    strict = make_tool(repo_path, key, "reject")
    strict.call(
        {"command": "str_replace", "path": "/memories/n.md", "old_str": "todo", "new_str": "done"}
    )
    strict.call(
        {"command": "insert", "path": "/memories/n.md", "insert_line": 2, "insert_text": "x"}
    )
    assert strict.store.read_text(gitmem.parse_path("/memories/n.md")) == f"legacy {AWS}\ndone\nx\n"


def test_redact(repo_path: Path, key: str) -> None:
    tool = make_tool(repo_path, key, "redact")
    text = f"notes\nkey {AWS}\ntoken {GITHUB} and {AWS}\n"
    out = tool.call({"command": "create", "path": "/memories/r.md", "file_text": text})
    assert out == (
        "File created successfully at: /memories/r.md\n"
        "Note: what looks like an AWS access key (lines 2, 3) and a GitHub token (line 3) was "
        "replaced with [REDACTED:aws-access-key], [REDACTED:github-token]. Memory must not "
        "hold credentials."
    )
    stored = tool.store.read_text(gitmem.parse_path("/memories/r.md"))
    assert stored == (
        "notes\nkey [REDACTED:aws-access-key]\n"
        "token [REDACTED:github-token] and [REDACTED:aws-access-key]\n"
    )
    op = next(tool.store.log())
    assert op.record.detail == {
        "redacted": [
            {"kind": "aws-access-key", "line": 2},
            {"kind": "github-token", "line": 3},
            {"kind": "aws-access-key", "line": 3},
        ]
    }
    assert AWS not in json.dumps(op.to_json())


def test_redact_str_replace_and_insert(repo_path: Path, key: str) -> None:
    tool = make_tool(repo_path, key, "redact")
    tool.call({"command": "create", "path": "/memories/n.md", "file_text": "a\nb\nc\n"})
    out = tool.call(
        {"command": "str_replace", "path": "/memories/n.md", "old_str": "b", "new_str": f"db {PEM}"}
    )
    assert out == (
        "The memory file has been edited. Here is the snippet showing the change (with line "
        "numbers):\n     1\ta\n     2\tdb [REDACTED:private-key]\n     3\tc\n     4\t\n"
        "Note: what looks like a private key (line 2) was replaced with [REDACTED:private-key]. "
        "Memory must not hold credentials."
    )
    out = tool.call(
        {
            "command": "insert",
            "path": "/memories/n.md",
            "insert_line": 1,
            "insert_text": "url: https://bot:Zq8wX2vB9n@example.org/hook",
        }
    )
    assert out == (
        "The file /memories/n.md has been edited.\n"
        "Note: what looks like a password in a URL (line 2) was replaced with "
        "[REDACTED:url-password]. Memory must not hold credentials."
    )
    assert tool.store.read_text(gitmem.parse_path("/memories/n.md")) == (
        "a\nurl: https://bot:[REDACTED:url-password]@example.org/hook\n"
        "db [REDACTED:private-key]\nc\n"
    )


def test_clean_writes_have_no_note(repo_path: Path, key: str) -> None:
    tool = make_tool(repo_path, key, "redact")
    out = tool.call({"command": "create", "path": "/memories/n.md", "file_text": NOTES})
    assert out == "File created successfully at: /memories/n.md"
    assert next(tool.store.log()).record.detail == {}


def test_allow_stores_verbatim(repo_path: Path, key: str) -> None:
    tool = make_tool(repo_path, key, "allow")
    out = tool.call({"command": "create", "path": "/memories/a.md", "file_text": AWS})
    assert out == "File created successfully at: /memories/a.md"
    assert tool.store.read_text(gitmem.parse_path("/memories/a.md")) == AWS


def test_store_api_and_bad_policy(repo_path: Path, key: str) -> None:
    store = MemoryStore.open(repo_path, key, create=True, secrets="redact")
    store.create(gitmem.parse_path("/memories/s"), f"x {OPENAI}")
    assert store.read_text(gitmem.parse_path("/memories/s")) == "x [REDACTED:openai-key]"
    with pytest.raises(SecretRefused) as info:
        MemoryStore.open(repo_path, key).insert(gitmem.parse_path("/memories/s"), 1, ANTHROPIC)
    assert info.value.findings == (
        Finding("anthropic-key", "an Anthropic API key", 2, 24, 24 + len(ANTHROPIC)),
    )
    with pytest.raises(gitmem.UsageError):
        MemoryStore.open(repo_path, key, secrets="strip")  # type: ignore[arg-type]
    with pytest.raises(gitmem.UsageError):
        GitMemoryTool(repo_path, key=key, secrets="off")  # type: ignore[arg-type]
