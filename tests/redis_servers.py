"""Redis servers that tests start themselves from the ``redis-server``
binary, on free loopback ports, and tear down afterwards:

* ``redis_server`` -- a throwaway single server (no persistence) that a test
  can stop, start and restart (fault tests);
* ``redis_cluster_url`` -- a 3-master Redis Cluster for the session
  (``cluster-enabled yes``, created with ``redis-cli --cluster create``).

Without the binaries the tests skip, unless CRAWLDEDUP_REQUIRE_SERVICES is
set (CI), where they fail.  tests/conftest.py imports these fixtures.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

__all__ = ["redis_cluster_url", "redis_server", "RedisServer"]


def _need_binaries():
    missing = [b for b in ("redis-server", "redis-cli") if shutil.which(b) is None]
    if missing:
        message = f"{' and '.join(missing)} not installed (apt-get install redis-server)"
        if os.environ.get("CRAWLDEDUP_REQUIRE_SERVICES"):
            pytest.fail(message + " (CRAWLDEDUP_REQUIRE_SERVICES is set)", pytrace=False)
        pytest.skip(message)


def _port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(cluster_bus=False):
    """A free loopback port (and, for a cluster node, port + 10000 free too)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not cluster_bus or (port + 10000 < 65536 and _port_free(port + 10000)):
            return port
    raise RuntimeError("no free loopback port")


def _wait_answering(port, proc, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server on port {port} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(64).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.02)
    raise RuntimeError(f"redis-server on port {port} did not answer")


class RedisServer:
    """A redis-server process this test owns: ``url``, ``stop()``,
    ``start()``, ``restart()`` (the data is lost: no persistence)."""

    def __init__(self, directory, port=None, extra=()):
        self.directory = directory
        self.port = port or free_port()
        self.extra = list(extra)
        self.proc = None

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", self.directory,
                "--protected-mode", "no", *self.extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_answering(self.port, self.proc)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self):
        self.stop()
        self.start()


@pytest.fixture
def redis_server():
    """A throwaway redis-server on a free loopback port."""
    _need_binaries()
    directory = tempfile.mkdtemp(prefix="crawldedup-redis-")
    server = RedisServer(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_cluster_url():
    """A 3-master Redis Cluster on free loopback ports, for the session."""
    _need_binaries()
    directory = tempfile.mkdtemp(prefix="crawldedup-cluster-")
    nodes = []
    try:
        for i in range(3):
            port = free_port(cluster_bus=True)
            node = RedisServer(directory, port, [
                "--cluster-enabled", "yes",
                "--cluster-config-file", os.path.join(directory, f"nodes-{i}.conf"),
                "--cluster-node-timeout", "5000",
                "--dbfilename", f"dump-{i}.rdb"])
            node.start()
            nodes.append(node)
        create = subprocess.run(
            ["redis-cli", "--cluster", "create",
             *[f"127.0.0.1:{n.port}" for n in nodes],
             "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True, text=True, timeout=60)
        if create.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {create.stdout}"
                               f"{create.stderr}")
        deadline = time.monotonic() + 30
        while True:
            states = [subprocess.run(["redis-cli", "-p", str(n.port), "cluster", "info"],
                                     capture_output=True, text=True, timeout=10).stdout
                      for n in nodes]
            if all("cluster_state:ok" in s for s in states):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not come up: {states}")
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{nodes[0].port}/0"
    finally:
        for node in nodes:
            node.stop()
        shutil.rmtree(directory, ignore_errors=True)
