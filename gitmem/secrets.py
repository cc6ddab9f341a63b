"""Credential detection for memory writes, and the ``reject`` / ``redact`` / ``allow`` policy.

Memory files are prose, checklists and notes, so the detector aims at text that is *very
likely* a credential: fixed-format tokens with a known prefix (cloud, VCS, chat, payment and
model-provider keys, JWTs, PEM private keys), passwords inside URLs, and high-entropy values
assigned to a credential-like name (``api_key = "..."``). Bare random-looking strings (commit
ids, UUIDs, hashes, base64 words) are never flagged on their own.

Only what a write adds is judged: findings must overlap the span of the file that the write
changed, so a file that already holds a flagged string (written under ``allow``) can still be
edited elsewhere. Messages name the kind of secret and its line, never the secret itself.

``detect-secrets`` is not used: its line-based plugin path is too slow to run on every write,
its settings are process-global, it gives no positions to redact with, it knows no Anthropic
keys, and it brings ``requests`` and ``PyYAML`` as dependencies (see ``docs/safeguards.md``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .crypto import KEY_TEXT
from .errors import GitMemError, UsageError, shown_repr

SecretPolicy = Literal["reject", "redact", "allow"]
POLICIES: tuple[SecretPolicy, ...] = ("reject", "redact", "allow")
DEFAULT_POLICY: SecretPolicy = "reject"


class SecretRefused(GitMemError):
    """A write held what looks like a credential and the policy is ``reject``."""

    def __init__(self, findings: Iterable[Finding]) -> None:
        self.findings = tuple(findings)
        super().__init__(refusal_message(self.findings))


@dataclass(frozen=True)
class Finding:
    """A likely credential: ``kind`` (slug), ``description``, 1-based ``line``, value span."""

    kind: str
    description: str
    line: int
    start: int
    end: int


@dataclass(frozen=True)
class Screened:
    """The text to store and the findings in the part the write changed."""

    text: str
    findings: tuple[Finding, ...]
    redacted: bool

    def record(self) -> list[dict[str, Any]]:
        """What the commit record keeps about redactions: kinds and lines, never values."""
        if not self.redacted:
            return []
        return [{"kind": f.kind, "line": f.line} for f in self.findings]


def check_policy(policy: str) -> SecretPolicy:
    """``policy`` if it is one of :data:`POLICIES`; :class:`UsageError` otherwise."""
    if policy not in POLICIES:
        raise UsageError(f"secrets must be one of {', '.join(POLICIES)}, not {shown_repr(policy)}")
    return policy


# -- the detector -----------------------------------------------------------------------------

_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_PLACEHOLDER_WORDS = (
    "example",
    "placeholder",
    "changeme",
    "change_me",
    "redacted",
    "dummy",
    "your",
    "xxxx",
    "****",
    "....",
    "<",
    ">",
    "${",
    "{{",
    "}}",
    "%(",
    "(",
    ")",
    "://",
)
_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _is_placeholder(value: str) -> bool:
    lowered = value.lower()
    return (
        value[:1] in "$%[/~." or any(w in lowered for w in _PLACEHOLDER_WORDS)
    ) or _DOTTED_NAME.fullmatch(value) is not None


def _has_letter_and_digit(value: str) -> bool:
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _token_body(value: str) -> bool:
    """A fixed-prefix token's body: mixed letters and digits (not a kebab-case word)."""
    return _has_letter_and_digit(value)


def _key_value(value: str) -> bool:
    """A value assigned to a key/secret/token name that looks generated, not written."""
    return (
        16 <= len(value) <= 512
        and not any(c.isspace() for c in value)
        and _has_letter_and_digit(value)
        and not _is_placeholder(value)
        and _entropy(value) >= 3.0
    )


def _password_value(value: str) -> bool:
    """A value assigned to a password name that looks like a password, not prose."""
    classes = sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
            any(c not in _ALNUM for c in value),
        )
    )
    # One word: a quoted phrase after "password:" is far more often prose than a passphrase.
    return (
        8 <= len(value) <= 256
        and not any(c.isspace() for c in value)
        and classes >= 2
        and any(c.isdigit() or c not in _ALNUM for c in value)
        and not _is_placeholder(value)
    )


def _url_password(value: str) -> bool:
    return (
        len(value) >= 3
        and not _is_placeholder(value)
        and value.lower()
        not in {
            "password",
            "passwd",
            "pass",
            "secret",
            "pwd",
            "token",
        }
    )


@dataclass(frozen=True)
class _Rule:
    kind: str
    description: str
    pattern: re.Pattern[str]
    # When given, the regex runs only if one of these occurs in the text: for a pattern without
    # a literal prefix a substring search is much cheaper than the regex pass.
    needles: tuple[str, ...] = ()
    group: str = ""
    check: Callable[[str], bool] | None = None
    # Matched against the ASCII-lowercased text (so the pattern is written in lowercase).
    folded: bool = False
    # The match must not continue a word on its left; "_" may precede it ("DB_PASSWORD=").
    word_start: bool = True
    # For the name rule: whether the text before the matched name word makes it a credential
    # name ("api_" before "key"), given the text and the word's offset.
    name_check: Callable[[str, int], bool] | None = None


def _rule(
    kind: str,
    description: str,
    pattern: str,
    group: str = "",
    check: Callable[[str], bool] | None = None,
    *,
    needles: tuple[str, ...] = (),
    folded: bool = False,
    word_start: bool = True,
    name_check: Callable[[str, int], bool] | None = None,
) -> _Rule:
    return _Rule(
        kind,
        description,
        re.compile(pattern),
        needles,
        group,
        check,
        folded,
        word_start,
        name_check,
    )


_ASSIGN = r"""[\"'`*]*[ \t]*(?::=|=>|[:=])[ \t]*"""
_VALUE = r"""(?:"(?P<dq>[^"\n]*)"|'(?P<sq>[^'\n]*)'|`(?P<bq>[^`\n]*)`|(?P<bare>[^\s"'`,;]+))"""
_SEP = r"[_\-. ]?"
_QUALIFIERS = (
    r"api|access|secret|private|signing|encryption|master|client|app|consumer|auth|refresh"
    r"|session|bearer"
)
# What may stand before "key": a qualifier ("api_key", "secret access key", "SIGNING_KEY").
_KEY_NAME = re.compile(rf"(?:^|[^a-z0-9])(?:{_QUALIFIERS})(?:{_SEP}(?:{_QUALIFIERS}))*{_SEP}\Z")
# What may stand before "secret" or "token": nothing word-like, or a qualifier.
_SECRET_NAME = re.compile(rf"(?:^|[^a-z0-9])(?:(?:{_QUALIFIERS}){_SEP})*\Z")


def _credential_name(low: str, start: int) -> bool:
    before = low[max(0, start - 40) : start]
    name = _KEY_NAME if low.startswith("key", start) else _SECRET_NAME
    return name.search(before) is not None


# Highest priority first: where two findings overlap, the earlier rule's is kept.
_RULES: tuple[_Rule, ...] = (
    _rule(
        "private-key",
        "a private key",
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        check=lambda v: re.search(r"[A-Za-z0-9+/=]{32}", v) is not None,
        word_start=False,
    ),
    _rule(
        # gitmem's own key text (crypto.KEY_TEXT_PREFIX, 48 base64url characters): the key
        # file `gitmem init` saves, imported with a home directory, would put the store's key
        # into the memory it encrypts, where the model reads it back.
        "gitmem-key",
        "a gitmem store key",
        KEY_TEXT.pattern,
    ),
    _rule(
        "aws-access-key",
        "an AWS access key",
        r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])",
    ),
    _rule(
        "aws-secret-key",
        "an AWS secret access key",
        rf"aws{_SEP}secret{_SEP}(?:access{_SEP})?key{_ASSIGN}[\"'`]?"
        r"(?P<v>[a-z0-9/+]{40})(?![a-z0-9/+])",
        "v",
        folded=True,
    ),
    _rule(
        "github-token",
        "a GitHub token",
        r"g(?:h[pousr]_[A-Za-z0-9]{36,251}|ithub_pat_[A-Za-z0-9_]{22,247})(?![A-Za-z0-9_])",
    ),
    _rule(
        "gitlab-token",
        "a GitLab token",
        r"gl(?:pat|dt|rt|ptt|ft|cbt|imt|soat|agent)-[A-Za-z0-9_\-]{20,}",
        check=_token_body,
    ),
    _rule(
        "slack-token",
        "a Slack token",
        r"xox[abposre]-[A-Za-z0-9\-]{10,}",
        check=_token_body,
    ),
    _rule(
        "slack-webhook",
        "a Slack webhook URL",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]{20,}",
        word_start=False,
    ),
    _rule(
        "stripe-key",
        "a Stripe secret key",
        r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}(?![A-Za-z0-9])",
        needles=("k_live_", "k_test_"),
    ),
    _rule(
        "anthropic-key",
        "an Anthropic API key",
        r"sk-ant-[A-Za-z0-9_\-]{20,}",
        check=_token_body,
    ),
    _rule(
        "openai-key",
        "an OpenAI API key",
        r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
        check=_token_body,
    ),
    _rule(
        "google-api-key",
        "a Google API key",
        r"AIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])",
    ),
    _rule("npm-token", "an npm token", r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
    _rule(
        "pypi-token",
        "a PyPI token",
        r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}",
    ),
    _rule(
        "huggingface-token",
        "a Hugging Face token",
        r"hf_[A-Za-z0-9]{34,}(?![A-Za-z0-9])",
        check=_token_body,
    ),
    _rule(
        "sendgrid-key",
        "a SendGrid API key",
        r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}(?![A-Za-z0-9_\-])",
    ),
    _rule(
        "jwt",
        "a JSON Web Token",
        r"eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{16,}",
    ),
    _rule(
        "url-password",
        "a password in a URL",
        r"://[^\s:/?#@\[\]\"'<>]*:(?P<v>[^\s/?#@\[\]\"'<>]+)@[A-Za-z0-9\[]",
        "v",
        _url_password,
        word_start=False,
    ),
    _rule(
        "authorization",
        "an HTTP authorization header",
        r"bearer[ \t]+(?P<v>[a-z0-9\-._~+/]{16,}=*)",
        "v",
        lambda v: _has_letter_and_digit(v) and _entropy(v) >= 3.0,
        folded=True,
    ),
    _rule(
        "authorization",
        "an HTTP authorization header",
        r"authorization:[ \t]*basic[ \t]+(?P<v>[a-z0-9+/]{8,}={0,2})",
        "v",
        lambda v: not _is_placeholder(v),
        folded=True,
    ),
    *(
        _rule(
            "password",
            "a password",
            rf"{word}{_ASSIGN}{_VALUE}",
            "value",
            _password_value,
            folded=True,
        )
        for word in ("passw(?:or)?d", "passphrase")
    ),
    # Anchored on the name's last word, one literal-prefixed (cheap) pass per word; the words
    # before it are checked by `_credential_name`.
    *(
        _rule(
            "secret",
            "a secret key or token",
            rf"{word}{_ASSIGN}{_VALUE}",
            "value",
            _key_value,
            folded=True,
            word_start=False,
            name_check=_credential_name,
        )
        for word in ("key", "secret", "token")
    ),
)
_TRAILING_PUNCTUATION = ".)"
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _value_span(rule: _Rule, match: re.Match[str]) -> tuple[int, int] | None:
    if rule.group != "value":
        return match.span(rule.group) if rule.group else match.span()
    for name in ("dq", "sq", "bq", "bare"):
        if match.group(name) is not None:
            start, end = match.span(name)
            if name == "bare":
                end = start + len(match.group(name).rstrip(_TRAILING_PUNCTUATION))
            return start, end
    return None


def _ascii_lower(text: str) -> str:
    """``text`` with ASCII letters lowercased and every offset kept."""
    low = text.lower()
    # str.lower may lengthen a few characters ("İ"); then fold ASCII only, which never does.
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


def scan(text: str, start: int = 0, end: int | None = None) -> list[Finding]:
    """Likely credentials in ``text``, in order, none overlapping another.

    With ``start``/``end``, only the lines holding that span are searched for the one-line
    kinds (every kind but private keys, which are searched for in the whole text): an edit of a
    long file then costs its own lines, not the file.
    """
    end = len(text) if end is None else end
    lo = text.rfind("\n", 0, start) + 1
    hi = text.find("\n", end)
    hi = len(text) if hi == -1 else hi
    window = text if (lo, hi) == (0, len(text)) else text[lo:hi]
    low_window: str | None = None
    taken: list[tuple[int, int]] = []
    found: list[Finding] = []
    for rule in _RULES:
        # Only private keys span lines; no folded rule searches the whole text.
        plain, offset = (text, 0) if rule.kind == "private-key" else (window, lo)
        subject = plain
        if rule.folded:
            low_window = _ascii_lower(window) if low_window is None else low_window
            subject = low_window
        if rule.needles and not any(n in subject for n in rule.needles):
            continue
        for match in rule.pattern.finditer(subject):
            begin = match.start()
            if rule.word_start and begin > 0 and subject[begin - 1] in _ALNUM:
                continue
            if rule.name_check is not None and not rule.name_check(subject, begin):
                continue
            span = _value_span(rule, match)
            if span is None or span[0] == span[1]:
                continue
            if rule.check is not None and not rule.check(plain[span[0] : span[1]]):
                continue
            first, last = span[0] + offset, span[1] + offset
            if any(s < last and first < e for s, e in taken):
                continue
            taken.append((first, last))
            line = text.count("\n", 0, first) + 1
            found.append(Finding(rule.kind, rule.description, line, first, last))
    found.sort(key=lambda f: f.start)
    return found


# -- the policy -------------------------------------------------------------------------------


def changed_span(before: str, after: str) -> tuple[int, int]:
    """The span of ``after`` that differs from ``before`` (common prefix and suffix removed)."""
    limit = min(len(before), len(after))
    lo, hi = 0, limit
    while lo < hi:  # the longest common prefix, by bisection over C-speed slice compares
        mid = (lo + hi + 1) // 2
        if before[:mid] == after[:mid]:
            lo = mid
        else:
            hi = mid - 1
    prefix = lo
    lo, hi = 0, limit - prefix
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if before[len(before) - mid :] == after[len(after) - mid :]:
            lo = mid
        else:
            hi = mid - 1
    return prefix, len(after) - lo


def _touches(finding: Finding, span: tuple[int, int]) -> bool:
    start, end = span
    if start == end:  # a pure deletion can still join two pieces into a secret
        return finding.start < start < finding.end
    return finding.start < end and start < finding.end


def redaction_marker(kind: str) -> str:
    """What a redacted secret of ``kind`` is replaced with."""
    return f"[REDACTED:{kind}]"


def screen(before: str, after: str, policy: SecretPolicy) -> Screened:
    """Apply ``policy`` to a write that turns file text ``before`` into ``after``.

    ``reject`` raises :class:`SecretRefused` naming what was found; ``redact`` replaces each
    finding with ``[REDACTED:<kind>]``; ``allow`` stores ``after`` unchanged.
    """
    if policy == "allow" or after == before:
        return Screened(after, (), False)
    span = changed_span(before, after)
    findings = [f for f in scan(after, *span) if _touches(f, span)]
    if not findings:
        return Screened(after, (), False)
    if policy == "reject":
        raise SecretRefused(findings)
    parts: list[str] = []
    kept: list[Finding] = []
    cursor = length = newlines = 0
    for f in findings:
        piece = after[cursor : f.start]
        marker = redaction_marker(f.kind)
        length += len(piece)
        newlines += piece.count("\n")
        kept.append(Finding(f.kind, f.description, newlines + 1, length, length + len(marker)))
        parts += (piece, marker)
        length += len(marker)
        cursor = f.end
    parts.append(after[cursor:])
    return Screened("".join(parts), tuple(kept), True)


# -- messages ---------------------------------------------------------------------------------


def _describe(findings: Iterable[Finding]) -> str:
    """``an AWS access key (line 3) and a GitHub token (lines 5, 9)``: grouped by kind."""
    lines: dict[str, list[int]] = {}
    names: dict[str, str] = {}
    for f in findings:
        names.setdefault(f.kind, f.description)
        if f.line not in lines.setdefault(f.kind, []):
            lines[f.kind].append(f.line)
    parts = [
        f"{names[k]} ({'line' if len(ls) == 1 else 'lines'} {', '.join(map(str, ls))})"
        for k, ls in lines.items()
    ]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def refusal_message(findings: Iterable[Finding]) -> str:
    """The refusal Claude sees: kinds and lines, never the secret."""
    found = tuple(findings)
    pronoun = "it" if len(found) == 1 else "them"
    return (
        f"refused to store what looks like {_describe(found)}. Memory must not hold "
        f"credentials; remove {pronoun} and try again."
    )


def redaction_note(detail: Mapping[str, Any]) -> str:
    """The sentence appended to a success message when a write was redacted ('' if not)."""
    entries = detail.get("redacted") or []
    if not entries:
        return ""
    kinds = {r.kind: r.description for r in _RULES}
    findings = [
        Finding(str(e["kind"]), kinds.get(str(e["kind"]), "a secret"), int(e["line"]), 0, 0)
        for e in entries
    ]
    markers = ", ".join(dict.fromkeys(redaction_marker(f.kind) for f in findings))
    return (
        f"\nNote: what looks like {_describe(findings)} was replaced with {markers}. "
        "Memory must not hold credentials."
    )


__all__ = [
    "DEFAULT_POLICY",
    "POLICIES",
    "Finding",
    "Screened",
    "SecretPolicy",
    "SecretRefused",
    "changed_span",
    "check_policy",
    "redaction_marker",
    "redaction_note",
    "refusal_message",
    "scan",
    "screen",
]
