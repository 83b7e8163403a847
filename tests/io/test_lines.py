"""dgtraces.io.lines (issue #36): regular files only, text streamed within bounds."""

import hashlib
import os

import pytest

from dgtraces.errors import DgtracesError
from dgtraces.io.lines import TextLines, check_regular, open_regular


def test_lines_and_digest_of_a_regular_file(tmp_path):
    path = tmp_path / "log.txt"
    data = b"one\r\ntwo\n\nthree"
    path.write_bytes(data)
    lines = TextLines(path)
    assert list(lines) == [(1, "one"), (2, "two"), (3, ""), (4, "three")]
    assert lines.digest == hashlib.sha256(data).hexdigest() and lines.n_bytes == len(data)
    with open_regular(path) as fh:
        assert fh.read() == data


@pytest.mark.parametrize("data,row", [
    (b"ok\n" + b"x" * 200 + b"\n", 2),  # a line over the bound
    (b"ok\nbad \xff byte\n", 2),  # not UTF-8
])
def test_a_bad_line_is_bad_file_naming_it(tmp_path, data, row):
    path = tmp_path / "log.txt"
    path.write_bytes(data)
    with pytest.raises(DgtracesError) as exc:
        list(TextLines(path, max_line_bytes=100))
    assert exc.value.code == "BAD_FILE" and exc.value.failures[0].row == row


def test_a_file_over_the_bound_is_refused_before_reading(tmp_path):
    path = tmp_path / "log.txt"
    path.write_bytes(b"a\n" * 100)
    with pytest.raises(DgtracesError) as exc:
        next(iter(TextLines(path, max_bytes=50)))
    assert exc.value.code == "BAD_FILE"


def test_special_files_and_missing_paths(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        for call in (check_regular, open_regular, lambda p: list(TextLines(p))):
            with pytest.raises(DgtracesError) as exc:
                call(path)
            assert exc.value.code == "BAD_FILE"
    with pytest.raises(DgtracesError) as exc:
        open_regular(tmp_path / "absent")
    assert exc.value.code == "NOT_FOUND"
    link = tmp_path / "link"
    link.symlink_to(fifo)  # a link to a FIFO is a FIFO
    with pytest.raises(DgtracesError) as exc:
        check_regular(link)
    assert exc.value.code == "BAD_FILE"
