"""``crawldedup record`` and ``crawldedup due`` as real processes."""

import json
import os
import subprocess
import sys
import uuid

import pytest

from conftest import platform_lacks
from crawldedup.recrawl import RecrawlState

T0 = 1_700_000_000


def cli(*args, stdin=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "crawldedup", *map(str, args)],
                          input=stdin, capture_output=True, timeout=timeout)


def jsonl(*items):
    return ("\n".join(json.dumps(item) for item in items) + "\n").encode()


def verdicts(run):
    return [json.loads(line) for line in run.stdout.decode().splitlines()]


@pytest.fixture(params=["sqlite", "redis", "cluster"])
def state_arg(request, tmp_path):
    if request.param == "sqlite":
        yield [f"--state={tmp_path / 'recrawl.db'}"]
        return
    url = request.getfixturevalue("redis_cluster_url" if request.param == "cluster"
                                  else "redis_url")
    prefix = f"test:recrawl-cli:{uuid.uuid4().hex}"
    yield [f"--state={url}", f"--prefix={prefix}"]
    with RecrawlState(url, prefix=prefix) as state:
        state.store.clear()


def test_record_then_due(state_arg):
    first = jsonl(*({"url": f"https://s{i % 2}.example/{i}", "status": 200,
                     "headers": {"ETag": f'"{i}"'}, "digest": f"{i:032x}", "time": T0}
                    for i in range(6)))
    run = cli("record", *state_arg, "-", stdin=first)
    assert run.returncode == 0, run.stderr
    assert [v["verdict"] for v in verdicts(run)] == ["new"] * 6
    assert b"recorded 6 fetches: new 6" in run.stderr
    second = jsonl(
        {"url": "https://s0.example/0", "status": 304, "headers": {}, "time": T0 + 3600},
        {"url": "https://s1.example/1", "status": 200, "digest": f"{1:032x}", "time": T0 + 3600},
        {"url": "https://s0.example/2", "status": 200, "text": "now different",
         "time": T0 + 3600},
        {"url": "https://s1.example/9", "status": 200, "body": "<p>a new page</p>",
         "time": T0 + 3600})
    run = cli("record", *state_arg, stdin=second)
    assert run.returncode == 0, run.stderr
    assert verdicts(run) == [
        {"url": "https://s0.example/0", "verdict": "not_modified"},
        {"url": "https://s1.example/1", "verdict": "unchanged"},
        {"url": "https://s0.example/2", "verdict": "changed"},
        {"url": "https://s1.example/9", "verdict": "new"}]
    later = T0 + 400 * 86400
    run = cli("due", *state_arg, "--limit", 100, "--now", later)
    assert run.returncode == 0, run.stderr
    printed = run.stdout.decode().split()
    assert sorted(printed) == sorted({f"https://s{i % 2}.example/{i}" for i in range(6)}
                                     | {"https://s1.example/9"})
    assert b"7 URLs due printed" in run.stderr
    run = cli("due", *state_arg, "--limit", 100, "--per-host", 2, "--now", later)
    assert sorted(u.split("/")[2] for u in run.stdout.decode().split()) == [
        "s0.example", "s0.example", "s1.example", "s1.example"]
    run = cli("due", *state_arg, "--limit", 3, "--now", T0)  # nothing due yet
    assert run.returncode == 0 and run.stdout == b""


def test_bad_lines_exit_1_with_one_line(tmp_path, capsys):
    state = f"--state={tmp_path / 'r.db'}"
    lines = jsonl({"url": "https://a.example/1", "status": 200, "digest": "00" * 16})
    lines += b"{not json\n"
    lines += jsonl({"url": "https://a.example/2", "status": 200, "digest": "11" * 16})
    run = cli("record", state, stdin=lines)
    assert run.returncode == 1
    assert run.stderr.decode().strip().splitlines()[-1].startswith(
        "crawldedup: error: <stdin> line 2: not JSON")
    assert b"Traceback" not in run.stderr
    assert len(verdicts(run)) == 1  # the line before it was recorded and printed
    run = cli("record", state, "--skip-bad", stdin=lines)
    assert run.returncode == 0
    assert [v["verdict"] for v in verdicts(run)] == ["unchanged", "new"]
    assert b"1 bad lines skipped" in run.stderr
    # the rest in this process (the same main() the command runs)
    from crawldedup.cli import main
    for bad, message in [
            ({"url": "https://a.example/3", "digest": "00" * 16}, b"status is missing"),
            ({"url": "https://a.example/3", "status": 200, "headers": {"ETag": "caf\u00e9"},
              "digest": "00" * 16}, b"non-ASCII"),
            ({"url": "https://a.example/3", "status": 304}, b"no version"),
            ({"url": "https://a.example/3", "status": 200, "colour": "red"}, b"unknown fields"),
            ({"url": "https://a.example/3", "status": 200, "digest": "zz"}, b"digest")]:
        path = tmp_path / "bad.jsonl"
        path.write_bytes(jsonl(bad))
        assert main(["record", state, str(path)]) == 1
        err = capsys.readouterr().err
        assert message.decode() in err and len(err.strip().splitlines()) == 1, (bad, err)
    with pytest.raises(SystemExit) as exit_:
        main(["due", state])  # --limit is required
    assert exit_.value.code == 2
    with pytest.raises(SystemExit) as exit_:
        main(["due", state, "--limit", "0"])
    assert exit_.value.code == 2
    assert main(["record", state, str(tmp_path / "missing.jsonl")]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_unreachable_redis_is_an_error_naming_it():
    run = cli("due", "--state", "redis://127.0.0.1:1/0", "--limit", 5)
    assert run.returncode == 1
    assert b"127.0.0.1:1" in run.stderr and b"Traceback" not in run.stderr


@platform_lacks(sys.platform == "win32", "pty")
def test_progress_bar_on_a_terminal_only(tmp_path):
    assert __import__("tqdm")
    import fcntl
    import pty
    import struct
    import termios
    path = tmp_path / "fetches.jsonl"
    path.write_bytes(jsonl(*({"url": f"https://p.example/{i}", "status": 200,
                              "digest": f"{i:032x}"} for i in range(50))))
    quiet = cli("record", f"--state={tmp_path / 'a.db'}", path)
    assert quiet.returncode == 0 and b"record:" not in quiet.stderr
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "crawldedup", "record",
                             f"--state={tmp_path / 'b.db'}", str(path)],
                            stdout=subprocess.PIPE, stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    out, _ = proc.communicate(timeout=120)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert proc.returncode == 0
    assert b"record:" in shown and b"lines" in shown
    assert len(out.splitlines()) == 50


def test_ctrl_c_on_record_says_how_many_fetches_were_recorded(tmp_path):
    """SIGINT while record waits for input: the batch read so far is
    recorded, every recorded fetch's verdict was printed, and the last line
    says how many (not "before any work was done"); exit status 130."""
    import signal
    import threading
    import time
    path = tmp_path / "int.db"
    proc = subprocess.Popen([sys.executable, "-m", "crawldedup", "record", f"--state={path}"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    lines = jsonl(*({"url": f"https://i.example/{i}", "status": 200,
                     "digest": f"{i:032x}", "time": T0} for i in range(3500)))
    # written by a thread: the verdicts are read meanwhile (a full pipe both ways
    # would stop both processes)
    writer = threading.Thread(target=lambda: (proc.stdin.write(lines), proc.stdin.flush()))
    writer.start()
    printed = b""
    deadline = time.monotonic() + 60
    while printed.count(b"\n") < 3000 and time.monotonic() < deadline:
        printed += os.read(proc.stdout.fileno(), 1 << 16)
    writer.join(timeout=60)
    time.sleep(1.0)  # the last 500 lines read, waiting for more
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    proc.stdin.close()
    printed += out
    assert proc.returncode == 130, err
    text = err.decode()
    assert "before any work was done" not in text and "Traceback" not in text, text
    assert "stopped by signal 2; recorded 3500 fetches: new 3500" in text, text
    assert printed.count(b"\n") == 3500
    with RecrawlState(str(path)) as state:
        assert len(state) == 3500


def one_error_line(run):
    text = run.stderr.decode()
    assert "Traceback" not in text, text
    errors = [line for line in text.splitlines() if line.startswith("crawldedup: error")]
    assert len(errors) == 1, text
    return errors[0]


def test_due_of_a_missing_state_is_a_usage_error_and_creates_nothing(tmp_path):
    run = cli("due", "--state", tmp_path / "typo.db", "--limit", 5)
    assert run.returncode == 2 and run.stdout == b""
    assert "typo.db' does not exist" in one_error_line(run)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["record", "due"])
def test_a_read_only_state_or_folder_is_named(tmp_path, command):
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "r.db"
    assert cli("record", "--state", path, stdin=jsonl(
        {"url": "https://r.example/1", "status": 200, "digest": "00" * 16})).returncode == 0
    args = [command, "--state", path] + (["--limit", 5] if command == "due" else [])
    before = path.read_bytes()
    os.chmod(path, 0o444)
    try:
        run = cli(*args, stdin=b"")
        assert run.returncode == 1, run.stderr
        line = one_error_line(run)
        assert f"the state file '{path}' is read-only" in line, line
        assert "unable to open" not in line
    finally:
        os.chmod(path, 0o644)
    os.chmod(folder, 0o555)
    try:
        run = cli(*args, stdin=b"")
        assert run.returncode == 1, run.stderr
        line = one_error_line(run)
        assert f"the folder '{folder}' of the state '{path}' is read-only" in line, line
    finally:
        os.chmod(folder, 0o755)
    assert path.read_bytes() == before
    run = cli("record", "--state", tmp_path / "missing" / "r.db", stdin=b"")
    assert run.returncode == 1
    assert "its folder" in one_error_line(run) and "does not exist" in one_error_line(run)
