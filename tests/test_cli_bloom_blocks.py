"""``crawldedup urls``'s Bloom block mode (a block of input as one bytes
object, its lines as spans, their hashes computed on the worker thread)
against the line mode it replaced: the same output, the same summary, the
same state file, byte for byte, and state files usable by either."""

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import examples
from crawldedup.cli import _attach_values, _delivery, build_parser
from crawldedup.cli import urls as _urls
from crawldedup.cli._delivery import Deliverer
from crawldedup.cli._url_state import BloomState

PIECES = [b"http://a.example/x?b=1&a=2", b"http://a.example/x?a=2&b=1", b"https://b.example/",
          b"HTTP://B.EXAMPLE:80/", b"http://[::1", b"http://a.example:99999/", b"ftp://c/",
          b"\xff\xfe", b"plain", b"http://\xe4\xbe\x8b.jp/\xff", b"http://a.example/#frag",
          b"https://b.example/?utm_source=x", b" ", b"\t", b"\r", b"", b"\x0b"]
INPUTS = st.lists(st.one_of(st.sampled_from(PIECES), st.binary(max_size=8)),
                  max_size=40).map(lambda parts: b"\n".join(parts))
CASES = [
    b"http://a.example/1\r\nhttp://a.example/2\n\n   http://a.example/1  \n\t\nhttp://a.example/3",
    b"http://x/\xff\xfe\nhttp://x/\xff\xfe\r\nhttp://[::1\nhttp://[::1\nno newline at the end",
    b"\n\n\n",
    b"",
]


def run(tmp_path, name, data, state, flags, blocks, monkeypatch):
    """(exit status, stdout, stderr) of ``crawldedup urls FILE --state
    STATE *flags`` run in this process, reading 37 bytes at a time (lines
    across blocks), in block mode or (blocks False) in the line mode."""
    source = tmp_path / name
    source.write_bytes(data)
    with monkeypatch.context() as patch:
        patch.setattr(_delivery, "AHEAD_READ_SIZE", 37)
        patch.setattr(BloomState, "read_size", 37)
        if not blocks:
            patch.setattr(Deliverer, "uses_blocks", lambda self: False)
        args = build_parser().parse_args(_attach_values(
            ["urls", str(source), "--state", str(state), "--capacity", "2000", *flags]))
        out, err = io.BytesIO(), io.StringIO()
        status = _urls.run_urls(args, out, err, io.BytesIO())
    return status, out.getvalue(), err.getvalue().replace(str(state), "STATE")


def both_modes(tmp_path, monkeypatch, runs, flags):
    """Run each input of runs in turn over one state per mode; every run's
    output and summary, and the state files, are the same in both."""
    got = {}
    for blocks in (True, False):
        state = tmp_path / f"state-{blocks}.bloom"
        state.unlink(missing_ok=True)
        got[blocks] = [run(tmp_path, "in.txt", data, state, flags, blocks, monkeypatch)
                       for data in runs]
        got[blocks].append(state.read_bytes())
    assert got[True] == got[False]
    return got[True]


@pytest.mark.parametrize("flags", [[], ["--canonical"], ["--layout", "blocked"],
                                   ["--canonical", "--layout", "blocked"]])
def test_block_mode_equals_line_mode_on_edge_cases(tmp_path, monkeypatch, flags):
    results = both_modes(tmp_path, monkeypatch, CASES, flags)
    assert results[0][0] == 0
    assert results[0][1].startswith(b"http://a.example/1\nhttp://a.example/2\nhttp://a.example/3\n")


def test_block_mode_is_used(tmp_path, monkeypatch):
    """The block mode really runs for a Bloom state (and not with --strip-tracking)."""
    calls = []
    original = BloomState.span_keys

    def spy(self, canonical, data, spans):
        calls.append(len(spans))
        return original(self, canonical, data, spans)

    monkeypatch.setattr(BloomState, "span_keys", spy)
    state = tmp_path / "s.bloom"
    status, out, _ = run(tmp_path, "a.txt", b"u1\nu2\nu1\n", state, [], True, monkeypatch)
    assert status == 0 and out == b"u1\nu2\n" and calls
    calls.clear()
    status, out, _ = run(tmp_path, "b.txt", b"http://a/?utm_source=x\n", tmp_path / "t.bloom",
                         ["--canonical", "--strip-tracking"], True, monkeypatch)
    assert status == 0 and out == b"http://a/?utm_source=x\n" and not calls


@settings(max_examples=examples(0.3), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(INPUTS, min_size=1, max_size=3), st.sampled_from([[], ["--canonical"]]))
def test_block_mode_equals_line_mode(tmp_path, monkeypatch, runs, flags):
    both_modes(tmp_path, monkeypatch, runs, flags)


@pytest.mark.parametrize("flags", [[], ["--canonical"]])
def test_state_files_shared_by_the_modes(tmp_path, monkeypatch, flags):
    """A URL recorded in one mode is a duplicate in the other."""
    first = b"http://a.example/1\nhttp://a.example/x?b=1&a=2\nhttp://[::1\n\xff\n"
    second = b"http://a.example/x?a=2&b=1\nhttp://a.example/1\nhttp://[::1\n\xff\nnew\n"
    expect = b"new\n" if flags else b"http://a.example/x?a=2&b=1\nnew\n"
    for blocks in (True, False):
        state = tmp_path / f"s-{blocks}.bloom"
        assert run(tmp_path, "1.txt", first, state, flags, blocks, monkeypatch)[0] == 0
        status, out, _ = run(tmp_path, "2.txt", second, state, flags, not blocks, monkeypatch)
        assert status == 0 and out == expect


def test_keys_looked_up_ahead_are_looked_up_again_when_not_found(tmp_path):
    """The worker thread looks a block's keys up while the block before is
    recorded: a key it did not find may have been added since, and is looked
    up again; one it found stays found (a Bloom filter's bits stay set)."""
    import numpy as np

    from crawldedup import BloomFilter
    from crawldedup.cli._delivery import Canonical, Journal

    bf = BloomFilter(1000, 0.01, seed=3)
    state = BloomState(bf)
    assert state.lookup_ahead
    out = io.BytesIO()
    deliver = Deliverer(state, Journal(str(tmp_path / "s.pending")), None, out)
    data = b"a\nb\nc\nd\n"
    n, spans, keys, seen = deliver.block_keys((data, True))
    assert n == 4 and seen is not None and not seen.any()
    bf.add_many([b"b", b"d"])  # recorded by the block before, after the lookup
    assert deliver.block((data, True), (n, spans, keys, seen)) == (4, 2)
    assert out.getvalue() == b"a\nc\n"
    # found ahead: not looked up again (this claim is taken as it is)
    claimed = np.array([True, False, False, False])
    assert deliver.block((b"e\nf\ng\nh\n", True), (4, *deliver.block_keys(
        (b"e\nf\ng\nh\n", True))[1:3], claimed)) == (4, 3)
    assert out.getvalue() == b"a\nc\nf\ng\nh\n"
    deliver.journal.close()
    # not ahead with --canonical (the worker is the busier thread there)
    canonical = Deliverer(state, Journal(str(tmp_path / "t.pending")), Canonical(False), out)
    assert canonical.block_keys((data, True))[3] is None
    canonical.journal.close()
