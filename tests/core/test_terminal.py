"""Box-controlled text printed on a terminal: one line, no control characters, and commands quoted so that
bash reads back the very same arguments."""

from __future__ import annotations

import subprocess

import pytest

from controlplane.core.terminal import one_line, shell_line

ARGVS = [
    ["python3", "-m", "agent"],
    ["sh", "-c", "echo a\nrm -rf /; echo 'x'"],
    ["tab\there", "back\\slash\n", "", "quote's", "é\x1b[31mred", "cr\r", "\x7f\x85", "sep\u2028"],
]


@pytest.mark.parametrize("argv", ARGVS)
def test_commands_are_one_line_and_bash_reads_back_the_same_arguments(argv):
    line = shell_line(argv)
    assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\u2028" not in line
    script = f'for a in {line}; do printf "%s\\0" "$a"; done'
    out = subprocess.run(["bash", "-c", script], capture_output=True, check=True,
                         env={"LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"}).stdout
    assert out.split(b"\0")[:-1] == [a.encode() for a in argv]


def test_text_is_one_line_with_controls_escaped_and_cut():
    assert one_line("a\nb\tc\x1b[2J") == "a\\nb\\tc\\x1b[2J"
    assert one_line("x" * 10, limit=5) == "xxxx…"
    assert one_line("line\u2029") == "line\\u2029"
