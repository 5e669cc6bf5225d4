"""Redis servers that tests start themselves from the ``redis-server``
binary, on free loopback ports, and tear down afterwards:

* ``redis_server`` -- a throwaway single server (no persistence) that a test
  can stop, start and restart (fault tests);
* ``redis_cluster_url`` -- a 3-master Redis Cluster for the session
  (``cluster-enabled yes``, created with ``redis-cli --cluster create``);
* ``redis_cluster_replicated`` -- a 3-master, 3-replica Redis Cluster of
  its own for one test, with a short node timeout, whose masters a test
  kills to see a replica promoted (failover tests).

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

__all__ = ["redis_cluster_replicated", "redis_cluster_url", "redis_server", "RedisServer",
           "ReplicatedCluster"]


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

    def kill(self):
        """SIGKILL: the process dies at once, without a word to its peers."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

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


def _cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True,
                          text=True, timeout=10).stdout


def _start_cluster(directory, count, replicas, node_timeout):
    """``count`` cluster nodes on free ports, joined by ``redis-cli --cluster
    create`` with ``replicas`` replicas per master; waits for cluster_state:ok."""
    nodes = []
    try:
        for i in range(count):
            port = free_port(cluster_bus=True)
            node = RedisServer(directory, port, [
                "--cluster-enabled", "yes",
                "--cluster-config-file", os.path.join(directory, f"nodes-{i}.conf"),
                "--cluster-node-timeout", str(node_timeout),
                "--dbfilename", f"dump-{i}.rdb"])
            node.start()
            nodes.append(node)
        create = subprocess.run(
            ["redis-cli", "--cluster", "create",
             *[f"127.0.0.1:{n.port}" for n in nodes],
             "--cluster-replicas", str(replicas), "--cluster-yes"],
            capture_output=True, text=True, timeout=60)
        if create.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {create.stdout}"
                               f"{create.stderr}")
        deadline = time.monotonic() + 30
        while True:
            states = [_cli(n.port, "cluster", "info") for n in nodes]
            if all("cluster_state:ok" in s for s in states):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not come up: {states}")
            time.sleep(0.1)
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return nodes


class ReplicatedCluster:
    """A 3-master, 3-replica Redis Cluster this test owns: ``url`` (a
    node's), ``nodes``, ``masters()``, ``master_of_slot(slot)``,
    ``wait_replicated()``, ``begin_move(slot, dst)`` / ``end_move(slot, dst)``
    (resharding), ``kill(node)`` (SIGKILL), ``promoted(replica)`` and
    ``wait_promoted(replica)`` (the replica took over its slots)."""

    def __init__(self, nodes):
        self.nodes = nodes

    def url_of(self, node):
        return f"redis://127.0.0.1:{node.port}/0"

    @property
    def url(self):
        return self.url_of(self.nodes[0])

    def _alive(self):
        return [n for n in self.nodes if n.proc is not None]

    def _topology(self, node):
        """{port: (role, master port or None, flags)} as ``node`` sees it."""
        out = {}
        ids = {}
        rows = [line.split() for line in _cli(node.port, "cluster", "nodes").splitlines()
                if line.strip()]
        for row in rows:
            ids[row[0]] = int(row[1].split("@")[0].rsplit(":", 1)[1])
        for row in rows:
            port = ids[row[0]]
            flags = row[2].split(",")
            role = "master" if "master" in flags else "replica"
            out[port] = (role, ids.get(row[3]), flags)
        return out

    def masters(self):
        """The nodes that are masters now, as the first live node sees it."""
        view = self._topology(self._alive()[0])
        return [n for n in self._alive() if view[n.port][0] == "master"
                and "fail" not in view[n.port][2]]

    def slot_ranges(self):
        """{master node: [(first slot, last slot), ...]} now."""
        out = {}
        for line in _cli(self._alive()[0].port, "cluster", "nodes").splitlines():
            row = line.split()
            if "master" not in row[2] or "fail" in row[2]:
                continue
            port = int(row[1].split("@")[0].rsplit(":", 1)[1])
            node = next(n for n in self.nodes if n.port == port)
            for part in row[8:]:
                if not part.startswith("["):  # "[slot->-id]": a slot being migrated
                    lo, _, hi = part.partition("-")
                    out.setdefault(node, []).append((int(lo), int(hi or lo)))
        return out

    def master_of_slot(self, slot):
        """The master node serving a slot now."""
        for node, ranges in self.slot_ranges().items():
            if any(lo <= slot <= hi for lo, hi in ranges):
                return node
        raise RuntimeError(f"no master serves slot {slot}")

    def wait_replicated(self, timeout=30.0):
        """Until every replica has every write its master acknowledged."""
        deadline = time.monotonic() + timeout
        while True:
            view = self._topology(self._alive()[0])
            behind = []
            for node in self._alive():
                role, master, _ = view[node.port]
                if role != "replica":
                    continue
                mine = _cli(node.port, "info", "replication")
                theirs = _cli(master, "info", "replication")
                offset = dict(line.split(":", 1) for line in mine.split()
                              if ":" in line).get("slave_repl_offset")
                wanted = dict(line.split(":", 1) for line in theirs.split()
                              if ":" in line).get("master_repl_offset")
                if "master_link_status:up" not in mine or offset != wanted:
                    behind.append(node.port)
            if not behind:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"replicas {behind} did not catch up")
            time.sleep(0.05)

    def _ids(self):
        """{node: its cluster node id}."""
        out = {}
        for line in _cli(self._alive()[0].port, "cluster", "nodes").splitlines():
            row = line.split()
            port = int(row[1].split("@")[0].rsplit(":", 1)[1])
            out.update({n: row[0] for n in self.nodes if n.port == port})
        return out

    def begin_move(self, slot, dst, keys=None):
        """Starts moving a slot to master ``dst`` (IMPORTING / MIGRATING) and
        migrates ``keys`` of it (all when None): the slot's other keys
        answer ASK from ``dst`` until ``end_move``."""
        src = self.master_of_slot(slot)
        ids = self._ids()
        _cli(dst.port, "cluster", "setslot", str(slot), "importing", ids[src])
        _cli(src.port, "cluster", "setslot", str(slot), "migrating", ids[dst])
        if keys is None:
            keys = _cli(src.port, "cluster", "getkeysinslot", str(slot), "1000").split()
        if keys:
            out = _cli(src.port, "migrate", "127.0.0.1", str(dst.port), "", "0", "10000",
                       "keys", *keys)
            if "OK" not in out:
                raise RuntimeError(f"MIGRATE failed: {out}")
        return src

    def end_move(self, slot, dst):
        """Finishes a move: the rest of the slot's keys migrated, the slot
        assigned to ``dst`` on every master."""
        src = self.master_of_slot(slot)
        rest = _cli(src.port, "cluster", "getkeysinslot", str(slot), "1000").split()
        if rest:
            _cli(src.port, "migrate", "127.0.0.1", str(dst.port), "", "0", "10000",
                 "keys", *rest)
        ids = self._ids()
        for node in (dst, src, *self.masters()):
            _cli(node.port, "cluster", "setslot", str(slot), "node", ids[dst])
        deadline = time.monotonic() + 30
        while self.master_of_slot(slot) is not dst or not all(
                "cluster_state:ok" in _cli(n.port, "cluster", "info") for n in self._alive()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"slot {slot} did not move to {dst.port}")
            time.sleep(0.05)

    def kill(self, node):
        """SIGKILL a node; returns its replica (the node to be promoted)."""
        view = self._topology(node)
        replica = next(n for n in self.nodes if view[n.port][1] == node.port)
        node.kill()
        return replica

    def promoted(self, replica):
        """Whether ``replica`` is a master and every live node says
        cluster_state:ok."""
        return ("role:master" in _cli(replica.port, "info", "replication")
                and all("cluster_state:ok" in _cli(n.port, "cluster", "info")
                        for n in self._alive()))

    def wait_promoted(self, replica, timeout=30.0):
        """Until ``promoted(replica)``."""
        deadline = time.monotonic() + timeout
        while not self.promoted(replica):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{replica.port} was not promoted")
            time.sleep(0.05)


@pytest.fixture
def redis_cluster_replicated():
    """A 3-master, 3-replica Redis Cluster for one test (node timeout 1 s)."""
    _need_binaries()
    directory = tempfile.mkdtemp(prefix="crawldedup-cluster-rep-")
    nodes = _start_cluster(directory, 6, 1, 1000)
    try:
        cluster = ReplicatedCluster(nodes)
        cluster.wait_replicated()
        yield cluster
    finally:
        for node in nodes:
            node.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_cluster_url():
    """A 3-master Redis Cluster on free loopback ports, for the session."""
    _need_binaries()
    directory = tempfile.mkdtemp(prefix="crawldedup-cluster-")
    nodes = _start_cluster(directory, 3, 0, 5000)
    try:
        yield f"redis://127.0.0.1:{nodes[0].port}/0"
    finally:
        for node in nodes:
            node.stop()
        shutil.rmtree(directory, ignore_errors=True)
