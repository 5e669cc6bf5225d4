"""crawldedup urls --state redis://... / --db redis://..., and crawldedup
info redis://..., as subprocesses against the real Redis."""

import os
import subprocess
import sys
import uuid

import pytest

from conftest import require_module

redis = require_module("redis")


def run(args, stdin=b""):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-m", "crawldedup", *args], input=stdin,
                          capture_output=True, env=env, timeout=120)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


@pytest.fixture
def base(redis_url):
    prefix = f"cdtest:{uuid.uuid4().hex[:12]}"
    yield redis_url.rstrip("/").rsplit("/", 1)[0] + "/0/" + prefix
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
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


def test_errors_are_messages_not_tracebacks(base):
    code, out, err = run(["info", base + "-none"])
    assert code == 1 and "no crawldedup filter" in err and "Traceback" not in err
    code, out, err = run(["urls", "--state", "redis://127.0.0.1:1/0/x", "-"], b"u\n")
    assert code == 1 and "127.0.0.1:1" in err and "Traceback" not in err
    code, out, err = run(["urls", "--state", "redis://127.0.0.1:6379/0", "-"], b"u\n")
    assert code == 1 and "needs a name" in err
    code, out, err = run(["urls", "--state", base, "--rotate-every", "1d", "-"], b"u\n")
    assert code == 1 and "not available" in err


@pytest.mark.parametrize("port, said", [("abc", "could not be cast to integer"),
                                        ("99999", "out of range 0-65535"),
                                        ("-1", "could not be cast to integer")])
@pytest.mark.parametrize("command", [["urls", "--state"], ["urls", "--state", "s.bf", "--db"],
                                     ["info"]])
def test_a_redis_url_with_a_bad_port_is_one_line(tmp_path, command, port, said):
    """A port that is not a number in 0..65535 is named, with the URL, in
    one line (it was redis-py's traceback for a Redis --state)."""
    url = f"redis://127.0.0.1:{port}/0/x"
    args = [a if a != "s.bf" else str(tmp_path / "s.bf") for a in command] + [url]
    code, out, err = run(args + (["-"] if command[0] == "urls" else []), b"u\n")
    assert code == 1 and "Traceback" not in err, err
    assert url in err and said in err, err
