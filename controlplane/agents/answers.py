"""Answer rules: how the trusted side takes a run's answer (`Run.answer`) from what its agent printed on
stdout (docs/presets.md). The text is the box's, so untrusted: a rule only selects, it never interprets.

    reference                    the reference agent's `roster agent: answer {"text": …}` line (the last)
    none                         no answer (a plain command)
    stdout                       all of stdout, trimmed
    last-line                    the last non-blank line
    json:<path>                  stdout is one JSON value; the string at the dotted path
    jsonl-last:<path>[?k=v&k=v]  the last line that is a JSON object with a string at <path> (and each
                                 dotted k equal to the string v)
    after-marker:<line>          the text after the last line equal to <line>
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

RULES = ("reference", "none", "stdout", "last-line", "json", "jsonl-last", "after-marker")
_PLAIN = ("reference", "none", "stdout", "last-line")  # rules without an argument
# The reference agent (workers/agent) ends with one line `roster agent: answer {"text": …}` (JSON, so any
# text fits on it). Tool results and the transcript never start a line with that prefix (the agent
# prefixes each of its own lines), so only the agent's final answer does.
REFERENCE_ANSWER_PREFIX = "roster agent: answer "
_PATH_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
MAX_RULE = 200


class AnswerRuleInvalid(ValueError):
    """The rule's text is not one of the rules; the message says what is."""


@dataclass(frozen=True)
class AnswerRule:
    kind: str
    path: tuple[str, ...] = ()
    where: tuple[tuple[tuple[str, ...], str], ...] = ()
    marker: str = ""


def _path(text: str, rule: str) -> tuple[str, ...]:
    if not _PATH_RE.match(text):
        raise AnswerRuleInvalid(f"{rule}: {text!r} is not a dotted field path like result or item.text")
    return tuple(text.split("."))


def parse_rule(text: object) -> AnswerRule:
    if not isinstance(text, str) or not text or len(text) > MAX_RULE:
        raise AnswerRuleInvalid(f"an answer rule is one of {', '.join(RULES)} "
                                f"(at most {MAX_RULE} characters)")
    if text in _PLAIN:
        return AnswerRule(kind=text)
    kind, sep, arg = text.partition(":")
    if not sep or kind not in RULES or kind in _PLAIN:
        raise AnswerRuleInvalid(f"unknown answer rule {text!r}; expected reference, none, stdout, last-line, "
                                "json:<path>, jsonl-last:<path>[?field=value&...] or after-marker:<line>")
    if kind == "after-marker":
        if not arg.strip() or "\n" in arg:
            raise AnswerRuleInvalid("after-marker: needs the marker line, e.g. after-marker:FINAL ANSWER:")
        return AnswerRule(kind=kind, marker=arg)
    if kind == "json":
        return AnswerRule(kind=kind, path=_path(arg, text))
    path_text, _, query = arg.partition("?")
    where = []
    if query:
        for condition in query.split("&"):
            field, eq, value = condition.partition("=")
            if not eq:
                raise AnswerRuleInvalid(f"{text}: {condition!r} is not field=value")
            where.append((_path(field, text), value))
    return AnswerRule(kind=kind, path=_path(path_text, text), where=tuple(where))


def _at(doc: object, path: tuple[str, ...]) -> object:
    for part in path:
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def reference_answer(output: str) -> str:
    """The reference agent's answer: the text of its last well-formed answer line ("" when none)."""
    for line in reversed(output.splitlines()):
        if not line.startswith(REFERENCE_ANSWER_PREFIX):
            continue
        try:
            doc = json.loads(line[len(REFERENCE_ANSWER_PREFIX):])
        except ValueError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("text"), str):
            return doc["text"]
    return ""


def answer_from(rule: AnswerRule, stdout: str) -> str | None:
    """The answer the rule finds in `stdout`, or None when it finds none."""
    if rule.kind == "none":
        return None
    if rule.kind == "reference":
        return reference_answer(stdout) or None
    if rule.kind == "stdout":
        return stdout.strip() or None
    lines = stdout.splitlines()
    if rule.kind == "last-line":
        return next((line.strip() for line in reversed(lines) if line.strip()), None)
    if rule.kind == "after-marker":
        marker = rule.marker.strip()
        for i in range(len(lines) - 1, -1, -1):
            if lines[i].strip() == marker:
                return "\n".join(lines[i + 1:]).strip() or None
        return None
    if rule.kind == "json":
        try:
            value = _at(json.loads(stdout), rule.path)
        except ValueError:
            return None
        return value if isinstance(value, str) else None
    for line in reversed(lines):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        value = _at(doc, rule.path)
        if isinstance(value, str) and all(_at(doc, path) == want for path, want in rule.where):
            return value
    return None
