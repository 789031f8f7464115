"""data/lines.py: bounded line length, replaced bytes, and knowing when more input is waiting."""

import os
import threading
import time

from data.lines import LineReader, normalized


def reader_over(tmp_path, data: bytes, **kw) -> LineReader:
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    return LineReader(open(path, "rb"), **kw)


def test_lines_cut_replaced_and_counted(tmp_path):
    reader = reader_over(tmp_path, b"a\nb\xff\n" + b"x" * 100 + b"\n\r\n\n" + "ñ".encode() * 8 + b"\nlast", max_bytes=10,
                         block=7)
    assert list(reader) == ["a", "b\ufffd", "x" * 10, "", "", "ñ" * 5, "last"]  # ñ is 2 bytes: never split
    assert (reader.cut_lines, reader.invalid_lines) == (2, 1)


def test_memory_stays_bounded_without_newlines(tmp_path, monkeypatch):
    reader = reader_over(tmp_path, b"y" * 1_000_000, max_bytes=1000, block=4096)
    largest = 0
    fill = reader._fill

    def watched_fill():
        nonlocal largest
        fill()
        largest = max(largest, len(reader.buffer))

    monkeypatch.setattr(reader, "_fill", watched_fill)
    assert list(reader) == ["y" * 1000] and reader.cut_lines == 1
    assert largest <= 1000 + 4096  # never more than the cap and one block


def test_waiting_tells_a_file_from_a_pausing_writer(tmp_path):
    file_reader = reader_over(tmp_path, b"one\ntwo\n")
    assert file_reader.waiting()
    read_end, write_end = os.pipe()
    os.write(write_end, b"typed\n")
    reader = LineReader(os.fdopen(read_end, "rb"))
    lines = iter(reader)
    assert next(lines) == "typed" and not reader.waiting()  # the writer pauses: nothing waits
    threading.Thread(target=lambda: (time.sleep(0.2), os.write(write_end, b"more\n"), os.close(write_end))).start()
    assert next(lines) == "more" and list(lines) == []


def test_only_a_newline_ends_a_line_and_a_byte_order_mark_is_dropped(tmp_path):
    data = "\ufeffone\u2028still one\x85and\x0cone\r\ntwo\tcells\n".encode()
    lines = [normalized(line) for line in reader_over(tmp_path, data)]
    assert lines == ["one still one and one", "two\tcells"]  # as `wc -l` counts: two


def test_a_decomposed_line_is_the_same_line():
    decomposed = "Jose\u0301 va al cafe\u0301."
    assert normalized(decomposed) == normalized("José va al café.") == "José va al café."
    assert normalized("\ufeffHola") == "Hola" and normalized("a\tb") == "a\tb"
