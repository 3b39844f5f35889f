"""Sentinels: what a box carries instead of a real credential. Each is shaped like the real thing for
its kind (prefix, length, alphabet, and GitHub's CRC32 checksum), random, and unique; the tripwire
recognises them by exact lookup of the stored values (controlplane.vault.services)."""

from __future__ import annotations

import secrets
import string
import zlib

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
AWS_ALPHABET = string.ascii_uppercase + "234567"


def _random(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _base62(n: int, width: int) -> str:
    out = ""
    while n:
        n, r = divmod(n, 62)
        out = BASE62[r] + out
    return out.rjust(width, "0")


def openai() -> str:
    return "sk-proj-" + _random(URLSAFE, 48)


def anthropic() -> str:
    return "sk-ant-api03-" + _random(URLSAFE, 93) + "AA"


def gemini() -> str:
    # Google API keys: AIza + 35 characters of letters, digits, - and _.
    return "AIza" + _random(URLSAFE, 35)


def github() -> str:
    # ghp_ + 30 random base62 characters + 6-character base62 CRC32 of them, as GitHub's tokens are built.
    body = _random(ALNUM, 30)
    return "ghp_" + body + _base62(zlib.crc32(body.encode()), 6)


def slack() -> str:
    team = str(secrets.randbelow(9 * 10**11) + 10**11)
    bot = str(secrets.randbelow(9 * 10**12) + 10**12)
    return f"xoxb-{team}-{bot}-{_random(ALNUM, 24)}"


def aws() -> str:
    return "AKIA" + _random(AWS_ALPHABET, 16)


def generic() -> str:
    return "roster-sentinel-" + _random(ALNUM, 32)


GENERATORS = {"openai": openai, "anthropic": anthropic, "gemini": gemini, "github": github, "slack": slack,
              "aws": aws, "generic": generic}


def make_sentinel(kind: str) -> str:
    try:
        return GENERATORS[kind]()
    except KeyError:
        raise ValueError(f"unknown secret kind {kind!r}; expected one of {', '.join(GENERATORS)}") from None
