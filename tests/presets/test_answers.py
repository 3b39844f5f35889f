# ruff: noqa: E501 - one case per line reads best as a table
"""Answer rules: what of a run's stdout is its answer (docs/presets.md)."""

from __future__ import annotations

import json

import pytest

from controlplane.agents.answers import AnswerRuleInvalid, answer_from, parse_rule

CODEX = "\n".join(json.dumps(e) for e in [
    {"type": "thread.started", "thread_id": "t"},
    {"type": "item.completed", "item": {"id": "0", "type": "reasoning", "text": "thinking"}},
    {"type": "item.completed", "item": {"id": "1", "type": "agent_message", "text": "Done: wrote notes.md"}},
    {"type": "item.completed", "item": {"id": "2", "type": "reasoning", "text": "after"}},
    {"type": "turn.completed", "usage": {"input_tokens": 10}},
])

CASES = [
    ("stdout", "  the answer\n", "the answer"),
    ("stdout", "   \n", None),
    ("last-line", "working...\nstill\nthe end\n\n", "the end"),
    ("json:result", json.dumps({"type": "result", "result": "42 files"}), "42 files"),
    ("json:result", "not json", None),
    ("json:result", json.dumps({"result": 42}), None),
    ("json:response.text", json.dumps({"response": {"text": "deep"}}), "deep"),
    ("jsonl-last:item.text", CODEX, "after"),
    ("jsonl-last:item.text?item.type=agent_message", CODEX, "Done: wrote notes.md"),
    ("jsonl-last:item.text?item.type=agent_message&type=item.completed", CODEX, "Done: wrote notes.md"),
    ("jsonl-last:item.text?item.type=nothing", CODEX, None),
    ("after-marker:FINAL ANSWER:", "[turn 1] x\nFINAL ANSWER:\nline one\nline two\n", "line one\nline two"),
    ("after-marker:FINAL ANSWER:", "FINAL ANSWER:\nfirst\nFINAL ANSWER:\nsecond", "second"),
    ("after-marker:FINAL ANSWER:", "no marker here", None),
]


@pytest.mark.parametrize(("rule", "stdout", "answer"), CASES)
def test_rule(rule, stdout, answer):
    assert answer_from(parse_rule(rule), stdout) == answer


@pytest.mark.parametrize("rule", ["", "stderr", "json", "json:", "json:a..b", "jsonl-last:x?y", "after-marker:", "x" * 201, 3])
def test_bad_rules_are_refused(rule):
    with pytest.raises(AnswerRuleInvalid):
        parse_rule(rule)
