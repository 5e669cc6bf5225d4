"""``crawldedup urls`` makes room ahead for the lines it expects (an estimate
from the input's size); room it cannot get is only a saving lost: the command
goes on and gives the same answers."""

import io

import pytest

from crawldedup import FingerprintSet
from crawldedup._kernel import IMPLEMENTATION
from crawldedup.cli import _attach_values, _delivery, _exact_state, build_parser
from crawldedup.cli import urls as _urls
from crawldedup.cli._url_state import reserve_room

TOO_MANY = 1 << 40  # 16 TiB of digests: no machine here has the memory


def test_a_set_refuses_room_it_cannot_get():
    fps = FingerprintSet()
    if IMPLEMENTATION == "core":  # the twin (a Python set) takes no room ahead
        with pytest.raises(MemoryError):
            fps.reserve(TOO_MANY)
    reserve_room(fps, TOO_MANY)  # the same refusal, taken as "no room"
    assert fps.add(b"\x01" * 16) and not fps.add(b"\x01" * 16) and len(fps) == 1


def urls(tmp_path, flags, monkeypatch, expected):
    """(status, stdout, stderr) of ``crawldedup urls`` in this process, its
    input taken for ``expected`` lines."""
    source = tmp_path / "in.txt"
    source.write_bytes(b"".join(b"https://a.example/%d?b=1&a=2\n" % (i % 700)
                                for i in range(1000)))
    state = tmp_path / "state"
    for suffix in ("", ".log"):
        (tmp_path / ("state" + suffix)).unlink(missing_ok=True)
    with monkeypatch.context() as patch:
        if expected is not None:
            patch.setattr(_urls, "expected_lines", lambda sources: expected)
            patch.setattr(_exact_state, "RESERVE_LIMIT", TOO_MANY)
            patch.setattr(_delivery, "REPEATS_LIMIT", TOO_MANY)
        args = build_parser().parse_args(_attach_values(
            ["urls", str(source), "--state", str(state), *flags]))
        out, err = io.BytesIO(), io.StringIO()
        status = _urls.run_urls(args, out, err, io.BytesIO())
    return status, out.getvalue(), err.getvalue().replace(str(state), "STATE")


@pytest.mark.parametrize("flags", [["--exact"], ["--exact", "--canonical"], ["--canonical"]])
def test_room_refused_changes_no_answer(tmp_path, monkeypatch, flags):
    plain = urls(tmp_path, flags, monkeypatch, None)
    refused = urls(tmp_path, flags, monkeypatch, TOO_MANY)
    assert plain[0] == 0 and plain[1].count(b"\n") == 700
    assert refused == plain
