"""Output capture with hostile bytes: what the box prints must always be storable, so a box cannot make its
own output (and its true exit status) vanish from the record."""

from __future__ import annotations

import threading

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


class _AttachedBox(_Box):
    def __init__(self, chunks, block_after: bool = False):
        super().__init__(chunks)
        self.block_after = block_after

    def attach(self, **_):
        def stream():
            yield from self.chunks
            if self.block_after:
                threading.Event().wait(5)  # a stream that never ends in time

        return stream()


def _attached(chunks, max_bytes=10, **kwargs) -> OutputCollector:
    collector = OutputCollector(_AttachedBox(chunks, **kwargs), max_bytes)
    collector.attach_before_start()
    collector.start()
    collector.finish(timeout=0.5)
    return collector


def test_attached_output_keeps_the_first_bytes_and_flags_the_rest():
    collector = _attached([b"0123456", b"789abc", b"def"])
    assert collector.text() == "0123456789" and collector.truncated is True


def test_attached_output_under_the_limit_is_whole_and_unflagged():
    collector = _attached([b"01234", b"56789"])
    assert collector.text() == "0123456789" and collector.truncated is False


def test_output_still_unread_when_the_wait_ends_is_flagged():
    collector = _attached([b"0123"], block_after=True)
    assert collector.text() == "0123" and collector.truncated is True


def test_output_read_back_from_dockers_log_is_never_claimed_whole():
    # Docker's on-disk log is capped and truncated when it rotates: it may have lost any part.
    assert _collect([b"short\n"]).truncated is True
