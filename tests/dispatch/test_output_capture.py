"""Output capture with hostile bytes: what the box prints must always be storable, so a box cannot make its
own output (and its true exit status) vanish from the record."""

from __future__ import annotations

import threading

from controlplane.dispatch.boxoutput import OutputCollector, output_sources
from controlplane.fleet.output import UNKNOWN, output_pieces, preview_pieces, stdout_text


def _frame(chunk):
    """A demuxed frame as docker-py gives it: bytes are stdout's; ("err", bytes) is stderr's."""
    if isinstance(chunk, tuple):
        return (None, chunk[1]) if chunk[0] == "err" else (chunk[1], None)
    return (chunk, None)


class _Box:
    def __init__(self, chunks):
        self.chunks = chunks

    def frames(self):
        return iter([_frame(chunk) for chunk in self.chunks])


def _collect(chunks, max_bytes=1024) -> OutputCollector:
    box = _Box(chunks)
    collector = OutputCollector(box, max_bytes, open_log=lambda container, follow: container.frames())
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

    def attach(self, **kwargs):
        assert kwargs.get("demux") is True  # each frame with its source
        def stream():
            yield from self.frames()
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


class _ExitedBox(_AttachedBox):
    """Its attached stream ended before the last bytes; its log (read after the exit) holds `logged`."""

    def __init__(self, attached, logged):
        super().__init__(attached)
        self.logged = logged

    def log_frames(self):
        return iter([_frame(chunk) for chunk in self.logged])


def _exited(attached, logged, max_bytes=10) -> OutputCollector:
    box = _ExitedBox(attached, logged)
    collector = OutputCollector(box, max_bytes, open_log=lambda container, follow: container.log_frames())
    collector.attach_before_start()
    collector.start()
    collector.finish(timeout=0.5)
    collector.take_tail_from_log()
    return collector


def test_a_tail_the_attached_stream_missed_is_taken_from_the_log_of_the_exited_box():
    collector = _exited([b"0123"], [b"01", b"23", ("err", b"45"), b"6"])
    assert collector.pieces() == [("stdout", "0123"), ("stderr", "45"), ("stdout", "6")]
    assert collector.truncated is False


def test_a_tail_from_the_log_still_stops_at_the_limit_and_says_so():
    collector = _exited([b"0123"], [b"0123456789abc"])
    assert collector.text() == "0123456789" and collector.truncated is True


def test_a_log_that_does_not_extend_what_was_read_changes_nothing():
    """A rotated log (its start gone) or another source order is not the box's whole output."""
    for logged in ([b"3456789"], [("err", b"0123"), b"45"], [b"0124"]):
        collector = _exited([b"0123"], logged)
        assert collector.pieces() == [("stdout", "0123")], logged


def test_a_full_capture_never_reads_the_log():
    collector = _exited([b"0123456789xyz"], [b"something else entirely"])
    assert collector.text() == "0123456789" and collector.truncated is True


def test_stdout_and_stderr_keep_arrival_order_and_sources():
    collector = _attached([b"out 1\n", ("err", b"err 1\n"), b"out 2\n", ("err", b"err 2\n"),
                           ("err", b"err 3\n")], max_bytes=1024)
    pieces = collector.pieces()
    assert pieces == [("stdout", "out 1\n"), ("stderr", "err 1\n"), ("stdout", "out 2\n"),
                      ("stderr", "err 2\nerr 3\n")]
    assert collector.text() == "out 1\nerr 1\nout 2\nerr 2\nerr 3\n"
    assert output_sources(pieces) == [["stdout", 6], ["stderr", 6], ["stdout", 6], ["stderr", 12]]


def test_the_byte_limit_counts_both_streams_and_cuts_at_the_first_byte_over():
    collector = _attached([b"0123", ("err", b"4567"), b"89ab"], max_bytes=10)
    assert collector.pieces() == [("stdout", "0123"), ("stderr", "4567"), ("stdout", "89")]
    assert collector.truncated is True


def test_a_character_split_by_the_other_stream_stays_whole():
    e_acute = "é".encode()
    collector = _attached([b"a" + e_acute[:1], ("err", b"E"), e_acute[1:] + b"b"], max_bytes=100)
    assert collector.pieces() == [("stdout", "a"), ("stderr", "E"), ("stdout", "éb")]


def test_stored_sources_read_back_and_bad_ones_are_one_unknown_chunk():
    output = "out\nerr\nmore\n"
    sources = [["stdout", 4], ["stderr", 4], ["stdout", 5]]
    assert output_pieces(output, sources) == [("stdout", "out\n"), ("stderr", "err\n"), ("stdout", "more\n")]
    assert stdout_text(output_pieces(output, sources)) == "out\nmore\n"
    bad_sources = ([], [["stdout", 4]], [["stdin", 13]], [["stdout", -1], ["stdout", 14]], "x",
                   [["stdout", "13"]])
    for bad in bad_sources:
        assert output_pieces(output, bad) == [(UNKNOWN, output)], bad
    assert output_pieces("", []) == []


def test_the_preview_keeps_sources_and_stops_at_the_limit():
    pieces = [("stdout", "abc"), ("stderr", "def"), ("stdout", "ghi")]
    assert preview_pieces(pieces, 5) == [("stdout", "abc"), ("stderr", "de")]
