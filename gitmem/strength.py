"""The strength bar for a new passphrase: long enough, and not quickly guessed.

Anyone with a copy of the repository can guess a slot's passphrase offline, for as long as they
like, at the cost of one Argon2id derivation per guess. A new passphrase (``init``, ``key add``,
``key passwd``) must therefore have at least :data:`MIN_CHARS` characters and take, by zxcvbn's
estimate, at least 10**:data:`MIN_GUESSES_LOG10` guesses; ``allow_weak`` is the explicit way past
it. Nothing here shows the passphrase, its length or its estimate.
"""

from __future__ import annotations

import unicodedata

from .errors import WeakPassphrase
from .keyslots import normalize_passphrase

MIN_CHARS = 12
MIN_GUESSES_LOG10 = 10
# zxcvbn refuses longer input (its matching is slow on it); the first this many characters
# stand for the whole, which is at least as hard to guess.
_ESTIMATED_CHARS = 72

_OVERRIDE = (
    ". Use several random words, or give --allow-weak-passphrase (in Python: "
    "allow_weak_passphrase=True) to keep it"
)


def check_new_passphrase(passphrase: str, *, allow_weak: bool = False) -> None:
    """Raise :class:`WeakPassphrase` unless ``passphrase`` clears the bar or ``allow_weak``.

    An empty or non-text passphrase is refused as :func:`~gitmem.keyslots.normalize_passphrase`
    refuses it, whatever ``allow_weak`` says.
    """
    normalize_passphrase(passphrase)
    if allow_weak:
        return
    text = unicodedata.normalize("NFC", passphrase)
    if len(text) < MIN_CHARS:
        raise WeakPassphrase(
            f"the new passphrase is too weak: it is shorter than {MIN_CHARS} characters" + _OVERRIDE
        )
    from zxcvbn import zxcvbn

    estimate = zxcvbn(text[:_ESTIMATED_CHARS])
    if float(estimate["guesses_log10"]) < MIN_GUESSES_LOG10:
        # zxcvbn's warnings are fixed sentences ("This is a top-10 common password."), never
        # a piece of the passphrase.
        warning = str(estimate["feedback"]["warning"] or "")
        why = f" (zxcvbn: {warning.rstrip('.')})" if warning else ""
        raise WeakPassphrase(
            "the new passphrase is too weak: it could be guessed in fewer than "
            f"10^{MIN_GUESSES_LOG10} tries{why}" + _OVERRIDE
        )
