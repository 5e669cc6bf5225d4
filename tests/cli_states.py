"""What the command-line tests of crawldedup urls share: a run as a real
subprocess whose output is read as it comes, and states of every kind, each
on its own (a private schema, database or Redis key prefix), removed after
the test."""

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid

from conftest import require_module, require_service

ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))


class Run:
    """``crawldedup urls ARGS FILE`` as a subprocess whose output goes into a
    pipe read by another process (``cat``, into a file), as a consumer
    would: a reader in the test's own process would wake when it reads,
    next to the test's thread that kills, which would time the kills to
    the moments just after the run's writes."""

    _n = 0

    def __init__(self, args, source, env=ENV, folder=None):
        Run._n += 1
        self.path = os.path.join(folder or os.environ.get("TMPDIR", "/tmp"),
                                 f"out-{os.getpid()}-{Run._n}.txt")
        self._file = open(self.path, "wb")
        self.reader = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=self._file)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "crawldedup", "urls", *map(str, args), str(source)],
            stdout=self.reader.stdin, stderr=subprocess.PIPE, env=env)
        self.reader.stdin.close()
        self.err = b""
        self._thread = threading.Thread(target=self._read_err)
        self._thread.start()

    def _read_err(self):
        self.err = self.proc.stderr.read()

    def started(self, timeout):
        """Wait until the run printed something (or ended)."""
        deadline = time.monotonic() + timeout
        while (not os.path.getsize(self.path) and self.proc.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.002)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)

    def wait(self):
        code = self.proc.wait(timeout=300)
        self.reader.wait(timeout=60)
        self._thread.join()
        self.proc.stderr.close()
        self._file.close()
        return code

    def lines(self):
        """The lines the output got whole (a killed run's output may end
        with part of a line, which a later run prints whole)."""
        with open(self.path, "rb") as f:
            data = f.read()
        return data[:data.rfind(b"\n") + 1].decode().splitlines()


def urls(start, stop):
    return [f"https://shop{i % 97}.example/item/{i}?ref={i * 7919 % 1000}"
            for i in range(start, stop)]


KINDS = ["bloom", "exact", "disk", "sqlite", "postgresql", "mariadb", "redis", "redis-db"]


class State:
    """The --state/--db arguments of a state, and forget_mode(), which
    removes the record of its key mode (as a state made before it was
    recorded has none)."""

    def __init__(self, args, forget_mode):
        self.args = args
        self.forget_mode = forget_mode


def _unlink(path):
    def forget():
        os.unlink(path)
    return forget


@contextlib.contextmanager
def states(tmp_path):
    """make(kind): a State of that kind (KINDS), on a state of its own in
    tmp_path (or a private schema, database or Redis key prefix), removed
    when the block ends."""
    cleanups = []

    def make(kind):
        local = tmp_path / "local"
        if kind in ("bloom", "rotating", "exact", "disk"):
            path = tmp_path / {"bloom": "s.bloom", "rotating": "s.rbf", "exact": "s.fps",
                               "disk": "s.disk"}[kind]
            extra = {"bloom": ["--capacity", "1000000", "--error-rate", "1e-7"],
                     "rotating": ["--capacity", "1000000", "--rotate-every", "1d"],
                     "exact": ["--exact"], "disk": ["--disk"]}[kind]
            return State(["--state", path, *extra], _unlink(str(path) + ".keys"))
        if kind == "sqlite":
            db = tmp_path / "s.db"

            def forget():
                conn = sqlite3.connect(db)
                conn.execute("DROP TABLE crawldedup_urls_keys")
                conn.commit()
                conn.close()
            return State(["--state", local, "--db", f"sqlite:///{db}"], forget)
        if kind in ("redis", "redis-db"):
            redis = require_module("redis")
            base = require_service("redis")
            prefix = f"cdtest:{uuid.uuid4().hex[:12]}"

            def drop():
                client = redis.Redis.from_url(base)
                # the state's keys, and a store's bucket keys ({PREFIX}:..., {PREFIX:G.J}:...)
                for pattern in (f"{prefix}*", f"{{{prefix}*"):
                    keys = list(client.scan_iter(match=pattern, count=1000))
                    if keys:
                        client.delete(*keys)
                client.close()

            def forget():
                client = redis.Redis.from_url(base)
                assert client.delete(f"{prefix}:urls-keys") == 1
                client.close()
            cleanups.append(drop)
            url = base.rstrip("/").rsplit("/", 1)[0] + "/0/" + prefix
            if kind == "redis":
                return State(["--state", url, "--capacity", "1000000", "--error-rate", "1e-7"],
                             forget)
            return State(["--state", local, "--db", url], forget)
        sa = require_module("sqlalchemy")
        base = require_service(kind)
        name = f"cd_{uuid.uuid4().hex[:12]}"
        engine = sa.create_engine(base, isolation_level="AUTOCOMMIT")
        what = "SCHEMA" if kind == "postgresql" else "DATABASE"
        with engine.connect() as conn:
            conn.exec_driver_sql(f"CREATE {what} {name}")

        def drop():
            with engine.connect() as conn:
                conn.exec_driver_sql(f"DROP {what} {name}"
                                     + (" CASCADE" if kind == "postgresql" else ""))
            engine.dispose()

        def forget():
            with engine.connect() as conn:
                conn.exec_driver_sql(f"DROP TABLE {name}.crawldedup_urls_keys")
        cleanups.append(drop)
        if kind == "postgresql":
            url = f"{base}?options=-csearch_path%3D{name}"
        else:
            url = base.rsplit("/", 1)[0] + "/" + name
        return State(["--state", local, "--db", url], forget)

    try:
        yield make
    finally:
        for cleanup in cleanups:
            cleanup()


