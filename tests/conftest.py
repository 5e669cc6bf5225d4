"""Shared fixtures: both kernel implementations, hypothesis profiles, services.

Kernel tests take the ``impl`` fixture and run once against the compiled core
and once against the pure-Python twin.  Each is imported by its own name, so a
missing or broken build fails loudly instead of quietly testing Python twice.
"""

import importlib
import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "ci", max_examples=300, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=3000, deadline=None)
# CI's second opinions (the pure-Python kernels, the oldest and newest
# Pythons): the default Python's run has the ci profile's depth already.
settings.register_profile(
    "brief", max_examples=30, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow])
# Under AddressSanitizer (an -O0 build, ten times slower): fewer examples, as
# the sanitizer looks for bad memory accesses on the code paths, which a few
# dozen examples per property already walk.
settings.register_profile(
    "sanitize", max_examples=40, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("CRAWLDEDUP_HYPOTHESIS_PROFILE", "dev"))


#: Set by .ci/sanitize: the core is a debug build running under ASan and
#: UBSan, 10 to 50 times slower than a release build.
SANITIZED = os.environ.get("CRAWLDEDUP_SANITIZED") == "1"


def sized(n, sanitized):
    """The work size of one of the heaviest tests: n, or the smaller
    sanitized under the sanitizers, which walk the same code paths on it."""
    return sanitized if SANITIZED else n


def examples(fraction):
    """A share of the profile's max_examples (at least 5), for properties
    whose examples cost many ordinary ones: the profile still governs."""
    return max(5, int(settings.default.max_examples * fraction))

IMPLEMENTATIONS = ["core", "reference"]
# CRAWLDEDUP_TEST_KERNELS (comma-separated names) narrows the kernels that
# ``impl`` and ``api`` run over.  CI's main run takes both; its pure-Python
# lane then runs over the twin only ("reference") and the other Pythons
# over the compiled core only ("core").  The tests that compare the two
# (the ``core`` and ``reference`` fixtures) run everywhere.
_chosen = os.environ.get("CRAWLDEDUP_TEST_KERNELS", "")
if _chosen:
    _unknown = sorted(set(_chosen.split(",")) - set(IMPLEMENTATIONS))
    if _unknown:
        raise pytest.UsageError(
            f"CRAWLDEDUP_TEST_KERNELS names unknown kernels {_unknown}; "
            f"known: {IMPLEMENTATIONS}")
    IMPLEMENTATIONS = [name for name in IMPLEMENTATIONS if name in _chosen.split(",")]


def load_impl(name):
    module = {"core": "crawldedup._core", "reference": "crawldedup._reference"}[name]
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - a broken build must fail
        pytest.fail(f"cannot import {module}: {exc}", pytrace=False)


@pytest.fixture(params=IMPLEMENTATIONS, scope="session")
def impl(request):
    """One kernel module: crawldedup._core, then crawldedup._reference."""
    return load_impl(request.param)


@pytest.fixture(scope="session")
def core():
    return load_impl("core")


@pytest.fixture(scope="session")
def reference():
    return load_impl("reference")


# The public classes on each kernel, in the manner of multidict's fixture:
# a test that takes ``api`` runs once with the package built on the compiled
# core and once with it built on the twin, whichever the environment chose
# (see implementations.py).  ``api`` is the package module: api.BloomFilter,
# api.FingerprintSet, api.IMPLEMENTATION...
@pytest.fixture(params=IMPLEMENTATIONS, scope="module")
def api(request):
    """crawldedup built on crawldedup._core, then on crawldedup._reference."""
    import implementations
    return implementations.package(request.param).api


@pytest.fixture(autouse=True)
def _api_modules(request):
    """While a test that takes ``api`` runs, ``import crawldedup.x`` (and
    pickle) find that package's modules."""
    if "api" not in request.fixturenames:
        yield
        return
    import implementations
    api = request.getfixturevalue("api")
    with implementations.active(implementations.package(api.IMPLEMENTATION)):
        yield


# ---- services (database servers) ----
# Tests that need a server take one of these fixtures.  They skip only when
# the server is unreachable AND CRAWLDEDUP_REQUIRE_SERVICES is unset; CI sets
# it, so there a missing server fails the run instead of skipping silently.

import socket  # noqa: E402
from urllib.parse import urlsplit  # noqa: E402

SERVICE_URLS = {
    "postgresql": os.environ.get("CRAWLDEDUP_TEST_POSTGRES_URL",
                                 "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
    "mariadb": os.environ.get("CRAWLDEDUP_TEST_MYSQL_URL",
                              "mysql+pymysql://root@127.0.0.1:3306/test"),
    "redis": os.environ.get("CRAWLDEDUP_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
}


def platform_lacks(condition, reason):
    """skipif for a platform without what the test needs (POSIX signals,
    flock, fork...).  Under CRAWLDEDUP_REQUIRE_SERVICES (CI) it never skips:
    the test runs and fails where the platform lacks it."""
    return pytest.mark.skipif(bool(condition) and not os.environ.get("CRAWLDEDUP_REQUIRE_SERVICES"),
                              reason=reason)


def require_module(name):
    """importlib.import_module(name) for an optional test dependency; a
    missing one skips the test, or fails it under
    CRAWLDEDUP_REQUIRE_SERVICES (CI), where a skip would hide a gap."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        message = f"{name} is not installed: {exc}"
        if os.environ.get("CRAWLDEDUP_REQUIRE_SERVICES"):
            pytest.fail(message + " (CRAWLDEDUP_REQUIRE_SERVICES is set)", pytrace=False)
        pytest.skip(message, allow_module_level=True)


def require_service(name):
    """The URL of the test server `name`, after checking that it accepts
    connections; skips (or fails, under CRAWLDEDUP_REQUIRE_SERVICES) if not."""
    url = SERVICE_URLS[name]
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=3):
            pass
    except OSError as exc:
        message = f"{name} test server {parts.hostname}:{parts.port} unreachable: {exc}"
        if os.environ.get("CRAWLDEDUP_REQUIRE_SERVICES"):
            pytest.fail(message + " (CRAWLDEDUP_REQUIRE_SERVICES is set)", pytrace=False)
        pytest.skip(message)
    return url


@pytest.fixture
def postgres_url():
    return require_service("postgresql")


@pytest.fixture
def mariadb_url():
    return require_service("mariadb")


@pytest.fixture
def redis_url():
    """The test Redis server (database 0 unless CRAWLDEDUP_TEST_REDIS_URL says
    otherwise).  Tests share it: each names its keys with a unique prefix and
    deletes them afterwards."""
    return require_service("redis")


# ---- integration tests ----
# Tests that run real servers, crawls or Spark jobs in subprocesses carry the
# `integration` marker, given here by file so that their authors need not
# repeat it.  `.ci/run` runs them once, with the compiled core on the default
# Python; its other runs (the pure-Python kernels, the oldest and newest
# Pythons, the sanitizers) select `-m "not integration"`: what those runs
# check, the kernels and wrappers, the integration tests only use.
INTEGRATION_FILES = ("test_redis_async.py", "test_redis_async_batches.py", "test_redis_bloom.py",
                     "test_redis_cli.py",
                     "test_redis_failover.py", "test_redis_faults.py", "test_redis_simhash.py",
                     "test_redis_store.py",
                     "test_scrapy_", "test_recrawl_scrapy.py", "test_spark")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "integration: runs real servers, crawls or Spark jobs (see conftest.py)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = item.path.name if hasattr(item, "path") else os.path.basename(str(item.fspath))
        if name.startswith(INTEGRATION_FILES):
            item.add_marker(pytest.mark.integration)


# Redis servers the tests start themselves (a throwaway server, a 3-master cluster).
from redis_servers import redis_cluster_replicated, redis_cluster_url, redis_server  # noqa: E402,F401,E501
