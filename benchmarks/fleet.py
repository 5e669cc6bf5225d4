"""Four ``crawldedup urls`` processes on one machine sharing one state.

Each process reads its own input file; every URL is in three of the four
files, so most of a process's URLs are also offered by the others at about
the same time, as in a fleet of crawlers discovering the same links.  For
each kind of shared state the fleet runs twice:

* ``whole``: every process runs to the end;
* ``killed``: one process is killed with SIGKILL once it has printed about
  a third of its input's worth, and a fifth process, started after the
  others end, finishes its journal.

Each line gives the wall time of the fleet (from the first start to the
last end), the distinct URLs it delivered per second, and over all the
outputs the URLs printed once, twice or more (and how many of those are
in the killed process's last write), and never (lost).  Exactly once
means ``twice`` and ``lost`` are 0, but for the one limit docs/cli.md
gives: a kill between a write into the output and the journal's record of
it prints that write again (at most 64 KiB of lines).

    python benchmarks/fleet.py [--urls 400000] [--kinds redis,redis-db,sqlite,postgresql]
        [--redis redis://127.0.0.1:6379/0] [--postgresql postgresql://postgres@127.0.0.1/test]

The Redis keys and PostgreSQL schema it makes are removed at the end; the
SQLite file and the journals are in a temporary folder.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Callable, Dict, List, Set, Tuple


def make_urls(n: int) -> List[str]:
    return [f"https://shop{i % 211}.example/item/{i}?ref={i * 7919 % 1000}" for i in range(n)]


class Shared:
    """The --state/--db arguments of a shared state, and its removal."""

    def __init__(self, kind: str, folder: str, opts: argparse.Namespace) -> None:
        self.kind = kind
        self.cleanup: Callable[[], None] = lambda: None
        prefix = f"cdbench:{uuid.uuid4().hex[:10]}"
        local = os.path.join(folder, "local")
        if kind == "redis":
            self.args = ["--state", f"{opts.redis.rstrip('/')}/{prefix}",
                         "--capacity", "10000000", "--error-rate", "1e-7"]
            self.cleanup = lambda: _drop_redis(opts.redis, prefix)
        elif kind == "redis-db":
            self.args = ["--state", local, "--db", f"{opts.redis.rstrip('/')}/{prefix}"]
            self.cleanup = lambda: _drop_redis(opts.redis, prefix)
        elif kind == "sqlite":
            self.args = ["--state", local, "--db", f"sqlite:///{os.path.join(folder, 's.db')}"]
        elif kind == "postgresql":
            import sqlalchemy as sa
            schema = prefix.replace(":", "_")
            engine = sa.create_engine(opts.postgresql, isolation_level="AUTOCOMMIT")
            with engine.connect() as conn:
                conn.exec_driver_sql(f"CREATE SCHEMA {schema}")

            def drop() -> None:
                with engine.connect() as conn:
                    conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
                engine.dispose()
            self.cleanup = drop
            url = opts.postgresql
            if url.startswith("postgresql://"):
                url = "postgresql+psycopg://" + url[len("postgresql://"):]
            self.args = ["--state", local, "--db", f"{url}?options=-csearch_path%3D{schema}"]
        else:
            raise SystemExit(f"unknown kind {kind!r}")


def _drop_redis(url: str, prefix: str) -> None:
    import redis
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=f"*{prefix}*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


def run(args: List[str], source: str, out: str, env: Dict[str, str]) -> subprocess.Popen:
    with open(out, "wb") as sink:
        return subprocess.Popen([sys.executable, "-m", "crawldedup", "urls", *args, source],
                                stdout=sink, stderr=subprocess.PIPE, env=env)


def lines_of(path: str) -> List[str]:
    with open(path, "rb") as f:
        data = f.read()
    return data[:data.rfind(b"\n") + 1].decode().splitlines()


def fleet(kind: str, everything: List[str], kill: bool,
          opts: argparse.Namespace) -> Tuple[float, collections.Counter, Set[str]]:
    folder = tempfile.mkdtemp(prefix="crawldedup-fleet-")
    shared = Shared(kind, folder, opts)
    env = dict(os.environ, TMPDIR=folder)  # a Redis state's journals go there
    try:
        rng = random.Random(7)
        inputs = []
        for n in range(4):
            mine = [u for i, u in enumerate(everything) if i % 4 != n]
            rng.shuffle(mine)
            path = os.path.join(folder, f"in{n}.txt")
            with open(path, "w") as f:
                f.write("\n".join(mine) + "\n")
            inputs.append(path)
        made = subprocess.run([sys.executable, "-m", "crawldedup", "urls", *shared.args],
                              input=b"", capture_output=True, env=env)
        if made.returncode:
            raise SystemExit(made.stderr.decode())
        outs = [os.path.join(folder, f"out{n}.txt") for n in range(5)]
        t0 = time.perf_counter()
        procs = [run(shared.args, source, out, env) for source, out in zip(inputs, outs)]
        if kill:
            third = len(everything) // 4 * 3 // 3 * len(everything[0])
            while os.path.getsize(outs[0]) < third and procs[0].poll() is None:
                time.sleep(0.002)
            procs[0].send_signal(signal.SIGKILL)
        for n, proc in enumerate(procs):
            _, err = proc.communicate()
            if proc.returncode and not (kill and n == 0):
                raise SystemExit(f"{kind}: process {n} failed: {err.decode()}")
        if kill:
            later = run(shared.args, inputs[0], outs[4], env)
            _, err = later.communicate()
            if later.returncode:
                raise SystemExit(f"{kind}: the later process failed: {err.decode()}")
        took = time.perf_counter() - t0
        printed = collections.Counter(line for out in outs if os.path.exists(out)
                                      for line in lines_of(out))
        tail: Set[str] = set()
        size = 0  # the killed process's last write (64 KiB at most)
        if kill:
            for line in reversed(lines_of(outs[0])):
                size += len(line) + 1
                if size > 1 << 16:
                    break
                tail.add(line)
        return took, printed, tail
    finally:
        shared.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=400_000)
    parser.add_argument("--kinds", default="redis,redis-db,sqlite,postgresql")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--postgresql", default="postgresql://postgres@127.0.0.1:5432/test")
    opts = parser.parse_args()
    everything = make_urls(opts.urls)
    print(f"{opts.urls:,} distinct URLs, each in 3 of 4 inputs ({opts.urls * 3 // 4:,} lines "
          f"each); 4 processes at once on one machine")
    print(f"{'state':<12}{'run':<8}{'wall s':>8}{'URLs/s':>10}{'once':>10}{'twice+':>8}"
          f"{'of them in the last write':>27}{'lost':>6}")
    for kind in opts.kinds.split(","):
        for kill in (False, True):
            took, printed, tail = fleet(kind, everything, kill, opts)
            once = sum(1 for n in printed.values() if n == 1)
            twice = {url for url, n in printed.items() if n > 1}
            lost = len(set(everything) - set(printed))
            print(f"{kind:<12}{'killed' if kill else 'whole':<8}{took:>8.2f}"
                  f"{len(printed) / took:>10,.0f}{once:>10,}{len(twice):>8,}"
                  f"{len(twice & tail):>27,}{lost:>6,}", flush=True)


if __name__ == "__main__":
    main()
