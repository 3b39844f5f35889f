"""Output capture with hostile bytes: what the box prints must always be storable, so a box cannot make its
own output (and its true exit status) vanish from the record."""

from __future__ import annotations

from controlplane.dispatch.box import OutputCollector


class _Box:
    def __init__(self, chunks):
        self.chunks = chunks

    def logs(self, **_):
        return iter(self.chunks)


def _collect(chunks, max_bytes=1024) -> OutputCollector:
    collector = OutputCollector(_Box(chunks), max_bytes)
    collector.run()
    return collector


def test_nul_bytes_never_reach_the_stored_output():
    """PostgreSQL text refuses NUL: one NUL would fail the run's final save, losing its output."""
    text = _collect([b"before\x00after\n", b"\x00\x00"]).text()
    assert "\x00" not in text
    assert text == "before\ufffdafter\n\ufffd\ufffd"


def test_invalid_utf8_and_a_cut_character_are_replaced():
    text = _collect([b"ok \xff\xfe ", "é".encode() * 3], max_bytes=6).text()
    assert text.startswith("ok ") and "\ufffd" in text
    text.encode("utf-8")  # always encodable
