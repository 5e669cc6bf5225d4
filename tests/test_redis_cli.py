"""crawldedup urls --state redis://... / --db redis://..., and crawldedup
info redis://..., as subprocesses against the real Redis."""

import hashlib
import os
import subprocess
import sys
import uuid

import pytest

from conftest import require_module

redis = require_module("redis")


def run(args, stdin=b"", cwd=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-m", "crawldedup", *args], input=stdin,
                          capture_output=True, env=env, timeout=120, cwd=cwd)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


@pytest.fixture
def base(redis_url):
    prefix = f"cdtest:{uuid.uuid4().hex[:12]}"
    yield redis_url.rstrip("/").rsplit("/", 1)[0] + "/0/" + prefix
    client = redis.Redis.from_url(redis_url)
    # a Bloom filter's keys and a store's metadata; a store's buckets
    keys = [key for match in (f"{prefix}*", f"{{{prefix}*")
            for key in client.scan_iter(match=match, count=1000)]
    if keys:
        client.delete(*keys)
    client.close()


@pytest.mark.parametrize("flag", ["--state", "--db"])
def test_two_crawlers_print_each_url_once(base, tmp_path, flag):
    a = "".join(f"https://example.com/{i}\n" for i in range(0, 3000)).encode()
    b = "".join(f"https://example.com/{i}\n" for i in range(2000, 5000)).encode()
    if flag == "--state":
        args = ["urls", "--state", base, "--capacity", "100000"]
    else:
        args = ["urls", "--state", str(tmp_path / "lock"), "--db", base]
    procs = []
    for machine in ("a", "b"):  # two machines: each its own $TMPDIR (lock and journal)
        (tmp_path / machine).mkdir()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
                   TMPDIR=str(tmp_path / machine))
        state = args if flag == "--state" else \
            ["urls", "--state", str(tmp_path / machine / "lock"), "--db", base]
        procs.append(subprocess.Popen([sys.executable, "-m", "crawldedup", *state, "-"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, env=env))
    outs = [p.communicate(data, timeout=120) for p, data in zip(procs, (a, b))]
    assert [p.returncode for p in procs] == [0, 0], outs
    printed = outs[0][0].decode().split() + outs[1][0].decode().split()
    assert sorted(printed) == sorted(f"https://example.com/{i}" for i in range(5000))
    code, out, _ = run(args + ["-"], a + b)
    assert code == 0 and out == ""  # all seen now


def test_info(base):
    code, out, err = run(["urls", "--state", base, "--capacity", "5000", "--error-rate",
                          "0.001", "-"], b"https://a.org/\nhttps://b.org/\n")
    assert code == 0, err
    code, out, err = run(["info", base])
    assert code == 0, err
    assert "capacity: 5,000" in out and "error rate (target): 0.001" in out
    assert "estimated count: 2" in out and "layout: blocked" in out


def test_info_describes_a_store_and_writes_nothing(base):
    """info on a RedisStore: its layout, capacity, digests and keys; on a
    Redis set that crawldedup 0.1.0 wrote (no metadata key) too, which it
    leaves without one; a name that holds nothing stays empty."""
    from crawldedup.redis.store import open_redis_store
    digests = [hashlib.md5(b"%d" % i).digest() for i in range(1234)]
    with open_redis_store(base + ":new", capacity=100_000) as store:
        store.add_many(digests)
        buckets, prefix = store._logic.buckets, store._logic.prefixes[0].decode()
    code, out, err = run(["info", base + ":new"])
    assert code == 0, err
    assert "kind: exact fingerprint store (crawldedup.redis.RedisStore, format version 1)" in out
    assert "layout: buckets" in out and "digest size: 16 bytes" in out
    assert "capacity: 100,000" in out and "fingerprints: 1,234 (1.23% of the capacity)" in out
    assert f"buckets: {buckets:,}," in out and f"slot groups: 1 ({prefix})" in out
    assert "window: none" in out

    client = redis.Redis.from_url(base.rsplit("/", 1)[0])
    try:
        old = base.rsplit("/", 1)[1] + ":old"
        client.sadd(old, *digests[:7])
        code, out, err = run(["info", base + ":old"])
        assert code == 0, err
        assert "no metadata key" in out and "layout: set" in out
        assert "digest size: 16 bytes" in out and "fingerprints: 7" in out
        assert not client.exists(old + ":meta")  # left as 0.1.0 wrote it
        with open_redis_store(base + ":old") as store:  # records the set layout
            assert store.layout == "set"
        code, out, err = run(["info", base + ":old"])
        assert code == 0, err
        assert "format version 1" in out and "layout: set" in out and "fingerprints: 7" in out

        code, out, err = run(["info", base + ":none"])
        assert code == 1 and "no crawldedup filter or store named" in err
        assert client.keys(base.rsplit("/", 1)[1] + ":none*") == []
    finally:
        client.close()


def test_info_describes_a_store_on_a_cluster(redis_cluster_url):
    from crawldedup.redis import RedisStore
    name = f"cdtest:{uuid.uuid4().hex[:12]}"
    with RedisStore(redis_cluster_url, name, 20, window=600, windows=2) as store:
        store.add_many([hashlib.sha1(b"%d" % i).digest() for i in range(500)])
        groups = store._logic.groups
        try:
            code, out, err = run(["info", f"{redis_cluster_url}/{name}"])
            assert code == 0, err
            assert "layout: buckets" in out and "digest size: 20 bytes" in out
            assert "fingerprints: 500 " in out and "a time slot" in out
            assert f"slot groups: {groups} ({{{name}}}:, " in out and groups == 12
            assert "window: 600 s, in 2 time slots of 300 s" in out
        finally:
            store.clear()
            store._transport.client.delete(store._logic.meta_key)


def test_errors_are_messages_not_tracebacks(base):
    code, out, err = run(["info", base + "-none"])
    assert code == 1 and "no crawldedup filter" in err and "Traceback" not in err
    code, out, err = run(["urls", "--state", "redis://127.0.0.1:1/0/x", "-"], b"u\n")
    assert code == 1 and "127.0.0.1:1" in err and "Traceback" not in err
    code, out, err = run(["urls", "--state", "redis://127.0.0.1:6379/0", "-"], b"u\n")
    assert code == 2 and "needs a name" in err
    code, out, err = run(["urls", "--state", base, "--rotate-every", "1d", "-"], b"u\n")
    assert code == 1 and "not available" in err


def _error_line(err):
    """The one line that says what is wrong (after the command's usage)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert lines[-1].startswith("crawldedup: error: "), err
    assert all(line.startswith(("usage:", " ")) for line in lines[:-1]), err
    return lines[-1]


@pytest.mark.parametrize("url, words", [
    ("redis://127.0.0.1:abc/0/x", "the port must be a number from 1 to 65535, got 'abc'"),
    ("redis://127.0.0.1:99999/0/x", "got '99999'"),
    ("redis://127.0.0.1:0/0/x", "got '0'"),
    ("redis://127.0.0.1:-1/0/x", "got '-1'"),
    ("redis://[::1]:65536/0/x", "got '65536'"),
    ("redis://127.0.0.1:6379/0/x?socket_timeout=abc", "socket_timeout"),
    ("unix:///tmp/crawldedup-no.sock?db=x", "db must be a database number, got 'x'"),
    ("unix://", "names the server's socket"),
    ("unix:///tmp/crawldedup-no.sock?db=0", "a unix:// socket URL cannot carry"),
])
def test_bad_redis_urls_are_one_line_usage_errors(tmp_path, url, words):
    """A Redis URL that cannot be used is refused before anything is opened:
    one line naming the flag, the URL and what is wrong, exit status 2."""
    outcomes = {
        "--state": run(["urls", "--state", url, "-"], b"https://a.org/\n", cwd=tmp_path),
        "info": run(["info", url], cwd=tmp_path),
    }
    if "cannot carry" not in words:  # --db needs no name: its default is used
        outcomes["--db"] = run(["urls", "--state", str(tmp_path / "lock"), "--db", url, "-"],
                               b"https://a.org/\n", cwd=tmp_path)
    for how, (code, out, err) in outcomes.items():
        line = _error_line(err)
        assert code == 2, (how, err)
        assert words in line and repr(url) in line, (how, line)
        if how != "info":
            assert line.startswith(f"crawldedup: error: {how} "), line
        assert out == ""
    assert os.listdir(tmp_path) == []  # nothing was created (no lock, no journal)


def test_bad_ports_raise_a_value_error_naming_the_url():
    from crawldedup.exact.stores import open_store
    from crawldedup.redis import RedisBloomFilter, RedisStore
    for url in ("redis://127.0.0.1:abc/0", "redis://127.0.0.1:70000/0"):
        for make in (lambda: RedisStore(url, "x"), lambda: RedisBloomFilter(url, "x", 100),
                     lambda: open_store(url + "/x")):
            with pytest.raises(ValueError, match="the port must be a number from 1 to 65535"):
                make()

