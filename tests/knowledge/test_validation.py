"""What a knowledge change may hold (docs/knowledge.md): every deny path of the validation, checked once
when a checkout is collected and again by the executor."""

from __future__ import annotations

import pytest

from controlplane.knowledge.validation import change_problems, encoded, path_problem


@pytest.mark.parametrize("path", ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/.", ".git/config",
                                  "docs/.GIT/hooks/pre-commit", "a\\b", "a\0b", "a\nb", "x" * 256])
def test_paths_outside_the_repository_are_refused(path):
    assert path_problem(path)


@pytest.mark.parametrize("path", ["notes.md", "world/hosts.txt", ".gitignore", "a.git/b", "dir/..x"])
def test_plain_paths_pass(path):
    assert path_problem(path) == ""


def test_binary_is_refused_unless_allowed(settings):
    entry = encoded("logo.png", "add", b"\x89PNG\r\n\x1a\n\0\0")
    assert "content_b64" in entry and "content" not in entry
    assert any("binary" in p for p in change_problems([entry]))
    settings.ROSTER_KNOWLEDGE_ALLOW_BINARY = True
    assert change_problems([entry]) == []


def test_size_limits_per_file_and_in_all(settings):
    settings.ROSTER_KNOWLEDGE_FILE_MAX_BYTES = 10
    assert any("a file is at most 10" in p for p in change_problems([encoded("a", "add", b"x" * 11)]))
    settings.ROSTER_KNOWLEDGE_FILE_MAX_BYTES = 100
    settings.ROSTER_KNOWLEDGE_CHANGE_MAX_BYTES = 150
    files = [encoded("a", "add", b"x" * 80), encoded("b", "add", b"y" * 80)]
    assert any("a change is at most 150" in p for p in change_problems(files))


def test_too_many_files_twice_named_and_unknown_actions(settings):
    settings.ROSTER_KNOWLEDGE_CHANGE_MAX_FILES = 1
    problems = change_problems([encoded("a", "add", b"1"), encoded("a", "add", b"2")])
    assert any("at most 1" in p for p in problems) and any("named twice" in p for p in problems)
    assert any("unknown action" in p for p in change_problems([{"path": "a", "action": "chmod"}]))


def test_a_content_that_does_not_match_its_hash_or_base64_is_refused():
    entry = {**encoded("a", "add", b"one"), "content": "two"}
    assert any("SHA-256" in p for p in change_problems([entry]))
    bad = {"path": "b", "action": "add", "content_b64": "!!!"}
    assert any("base64" in p for p in change_problems([bad]))


def test_a_deletion_carries_no_content():
    assert encoded("gone.md", "delete", None) == {"path": "gone.md", "action": "delete"}
    assert change_problems([encoded("gone.md", "delete", None)]) == []
