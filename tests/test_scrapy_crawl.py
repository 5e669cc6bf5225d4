"""Real Scrapy crawls, in subprocesses, of a generated site served on
127.0.0.1 by the test (tests/scrapy_site.py): every page is fetched exactly
once, by the server's own counts, with each backend; a JOBDIR crawl stopped
by SIGINT and resumed fetches no page twice; bad settings stop the crawl at
start-up (and make `scrapy runspider` and `scrapy crawl` exit 1)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import require_module

require_module("scrapy")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from conftest import platform_lacks  # noqa: E402
from scrapy_site import Site, expected_keys, run_crawl, start_crawl  # noqa: E402

PAGES = 1000
OURS = {"DUPEFILTER_CLASS": "crawldedup.scrapy.DupeFilter",
        "REQUEST_FINGERPRINTER_CLASS": "crawldedup.scrapy.RequestFingerprinter"}


@pytest.fixture(scope="module")
def expected():
    keys = expected_keys(PAGES)
    assert len(keys) > PAGES  # the query-string variants are pages of their own
    return keys


def read_stats(path):
    with open(path) as f:
        return json.load(f)


@pytest.mark.parametrize("backend", ["exact", "bloom"])
def test_every_page_fetched_once(tmp_path, expected, backend):
    stats_path = str(tmp_path / "stats.json")
    settings = {**OURS, "CRAWLDEDUP_DUPEFILTER": backend,
                "CRAWLDEDUP_CAPACITY": "100000", "CRAWLDEDUP_ERROR_RATE": "1e-7"}
    with Site(PAGES) as site:
        result = run_crawl(str(tmp_path), site.root, settings, stats_path)
        assert result.returncode == 0, result.stderr[-3000:]
        assert site.counts == {key: 1 for key in expected}
    stats = read_stats(stats_path)
    assert stats["reason"] == "finished"
    assert stats["downloader/response_count"] == len(expected)
    # every link on every page but the first to each page was filtered
    assert stats["dupefilter/filtered"] > 4 * len(expected)
    assert "Traceback" not in result.stderr


@platform_lacks(sys.platform == "win32", "needs POSIX signals")
def test_jobdir_sigint_and_resume(tmp_path, expected):
    job = str(tmp_path / "job")
    settings = {**OURS, "JOBDIR": job, "CONCURRENT_REQUESTS": "8",
                "CONCURRENT_REQUESTS_PER_DOMAIN": "8"}
    with Site(PAGES, delay=0.002) as site:
        proc = start_crawl(str(tmp_path), site.root, settings, str(tmp_path / "s1.json"))
        deadline = time.monotonic() + 60
        while site.fetched() < len(expected) // 2 and proc.poll() is None:
            assert time.monotonic() < deadline, "the crawl made no progress"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
        first = read_stats(str(tmp_path / "s1.json"))
        assert first["reason"] == "shutdown", output[-3000:]
        fetched_first = dict(site.counts)
        assert len(expected) // 3 < len(fetched_first) < len(expected)
        assert os.path.exists(os.path.join(job, "crawldedup-seen.fps"))

        result = run_crawl(str(tmp_path), site.root, settings, str(tmp_path / "s2.json"))
        assert result.returncode == 0, result.stderr[-3000:]
        second = read_stats(str(tmp_path / "s2.json"))
        assert second["reason"] == "finished"
        assert second.get("downloader/response_count", 0) > 0  # it did resume
        # no page fetched twice over both runs
        assert site.repeats() == {}
        # Scrapy drops the requests that were downloading when it stopped
        # (their fingerprints are kept, so they are not fetched again), and
        # what only they linked to: nearly every page is still reached.
        assert len(site.counts) >= 0.97 * len(expected)
        assert set(site.counts) <= expected


def test_resume_from_scrapys_own_jobdir(tmp_path):
    """A job started with Scrapy's RFPDupeFilter, stopped, and resumed with
    crawldedup's filter: requests.seen is imported, nothing is fetched twice."""
    job = str(tmp_path / "job")
    expected = expected_keys(300)
    with Site(300, delay=0.002) as site:
        scrapy_settings = {"JOBDIR": job, "CONCURRENT_REQUESTS": "8",
                           "CONCURRENT_REQUESTS_PER_DOMAIN": "8"}
        proc = start_crawl(str(tmp_path), site.root, scrapy_settings)
        deadline = time.monotonic() + 60
        while site.fetched() < len(expected) // 3 and proc.poll() is None:
            assert time.monotonic() < deadline, "the crawl made no progress"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        assert os.path.getsize(os.path.join(job, "requests.seen")) > 0
        result = run_crawl(str(tmp_path), site.root, {**OURS, "JOBDIR": job})
        assert result.returncode == 0, result.stderr[-3000:]
        assert "Imported" in result.stderr and "requests.seen" in result.stderr
        assert site.repeats() == {}
        assert len(site.counts) >= 0.97 * len(expected)


@pytest.mark.parametrize("settings, message", [
    ({"CRAWLDEDUP_DUPEFILTER": "exactly"}, "CRAWLDEDUP_DUPEFILTER must be one of"),
    ({"CRAWLDEDUP_DUPEFILTER": "bloom", "CRAWLDEDUP_CAPACITY": "0"},
     "CRAWLDEDUP_CAPACITY must be a positive integer"),
    ({"CRAWLDEDUP_DUPEFILTER": "redis", "CRAWLDEDUP_REDIS_URL": "redis://127.0.0.1:1"},
     "127.0.0.1:1"),
])
def test_bad_settings_stop_the_crawl(tmp_path, settings, message):
    """One error line, nothing fetched, and the crawl fails: `scrapy
    runspider` exits 1, so cron and CI see it."""
    stats_path = str(tmp_path / "stats.json")
    with Site(50) as site:
        result = run_crawl(str(tmp_path), site.root, {**OURS, **settings}, stats_path)
        assert site.counts == {}  # nothing fetched
    assert result.returncode == 1, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if "cannot start" in line]
    assert len(errors) == 1 and message in errors[0], result.stderr[-3000:]
    assert "[scrapy.dupefilters] ERROR" in errors[0]
    assert "Traceback" not in result.stderr
    assert read_stats(stats_path)["reason"] == "crawldedup_config_error"


@pytest.mark.parametrize("backend, state", [("bloom", "crawldedup-seen.bloom"),
                                            ("exact", "crawldedup-seen.fps")])
def test_a_damaged_jobdir_state_stops_the_crawl(tmp_path, backend, state):
    """The state a setting points to is checked like the setting: a JOBDIR
    state file damaged between two crawls stops the second with one error
    line naming the file (no traceback), nothing fetched, and the crawl
    fails."""
    settings = {**OURS, "CRAWLDEDUP_DUPEFILTER": backend, "CRAWLDEDUP_CAPACITY": "1000",
                "JOBDIR": str(tmp_path / "job")}
    path = tmp_path / "job" / state
    with Site(50) as site:
        result = run_crawl(str(tmp_path), site.root, settings)
        assert result.returncode == 0, result.stderr[-3000:]
        data = bytearray(path.read_bytes())
        data[4096 + 3] ^= 0x10  # a bit of the payload
        path.write_bytes(bytes(data))
        fetched = dict(site.counts)
        stats_path = str(tmp_path / "stats.json")
        result = run_crawl(str(tmp_path), site.root, settings, stats_path)
        assert site.counts == fetched  # nothing fetched again
    assert result.returncode == 1, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if "cannot start" in line]
    assert len(errors) == 1 and str(path) in errors[0] and "checksum mismatch" in errors[0], \
        result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert read_stats(stats_path)["reason"] == "crawldedup_config_error"


PROJECT_SETTINGS = """
BOT_NAME = "tiny"
SPIDER_MODULES = ["tiny.spiders"]
DUPEFILTER_CLASS = "crawldedup.scrapy.DupeFilter"
CRAWLDEDUP_DUPEFILTER = "bloom"
CRAWLDEDUP_ERROR_RATE = 2
"""


@pytest.mark.parametrize("twisted_process", [False, True])
def test_bad_setting_fails_scrapy_crawl_in_a_project(tmp_path, twisted_process):
    """`scrapy crawl` in a project whose settings.py holds a bad crawldedup
    setting exits 1 with one error line, under Scrapy's asyncio crawler
    process and under its Twisted one."""
    from scrapy_site import CRAWL_SETTINGS, SPIDER, crawl_env
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = tiny.settings\n")
    package = tmp_path / "tiny"
    (package / "spiders").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(PROJECT_SETTINGS)
    (package / "spiders" / "__init__.py").write_text("")
    (package / "spiders" / "site.py").write_text(SPIDER)
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site"]
    extra = {"TWISTED_REACTOR_ENABLED": "True", "FORCE_CRAWLER_PROCESS": "True"}
    for name, value in {**CRAWL_SETTINGS, **(extra if twisted_process else {})}.items():
        cmd += ["-s", f"{name}={value}"]
    with Site(50) as site:
        env = crawl_env(site.root, str(tmp_path / "stats.json"))
        env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env["PYTHONPATH"]
        result = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True,
                                timeout=120)
        assert site.counts == {}
    assert result.returncode == 1, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if "] ERROR:" in line]
    assert len(errors) == 1, result.stderr[-3000:]
    assert "CRAWLDEDUP_ERROR_RATE must be a number between 0 and 1" in errors[0]
    assert "Traceback" not in result.stderr
    assert read_stats(str(tmp_path / "stats.json"))["reason"] == "crawldedup_config_error"


@pytest.mark.parametrize("backend", ["redis", "redis-bloom"])
def test_two_processes_share_redis_under_scrapy_redis(tmp_path, expected, redis_url, backend):
    """Two crawler processes under scrapy-redis's scheduler, each with its
    own request queue, sharing only the Redis backend of the duplicate
    filter (a RedisStore, or a Bloom filter): each page is fetched once
    between them, by the process that met it first."""
    require_module("scrapy_redis")
    import uuid

    import redis
    name = f"test-crawldedup-{uuid.uuid4().hex[:12]}"
    settings = {**OURS, "CRAWLDEDUP_DUPEFILTER": backend, "REDIS_URL": redis_url,
                "CRAWLDEDUP_CAPACITY": 100_000,
                "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
                "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.FifoQueue",
                "SCHEDULER_PERSIST": "True"}
    client = redis.Redis.from_url(redis_url)
    try:
        # Each process starts from its own page; the server holds the
        # responses until both have asked, so both take part for sure.
        with Site(PAGES, gate=True) as site:
            roots = [site.root, site.root[:-1] + "1"]
            procs = [start_crawl(str(tmp_path), root,
                                 {**settings, "SCHEDULER_QUEUE_KEY": f"%(spider)s:requests:{i}"},
                                 str(tmp_path / f"s{i}.json"), name=name)
                     for i, root in enumerate(roots)]
            deadline = time.monotonic() + 60
            while site.fetched() < 2:
                assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
                time.sleep(0.02)
            site.gate.set()
            outputs = [p.communicate(timeout=120)[0] for p in procs]
            for p, out in zip(procs, outputs):
                assert p.returncode == 0, out[-3000:]
            assert site.counts == {key: 1 for key in expected}
        stats = [read_stats(str(tmp_path / f"s{i}.json")) for i in range(2)]
        counts = [s.get("downloader/response_count", 0) for s in stats]
        assert sum(counts) == len(expected)
        assert all(n > 0 for n in counts), counts  # both took part
        # each also met, and dropped, pages the other one had
        assert all(s["dupefilter/filtered"] > 0 for s in stats)
        if backend == "redis":
            from crawldedup.redis import RedisStore
            with RedisStore(redis_url, f"{name}:crawldedup-seen", 20) as store:
                assert len(store) == len(expected)
        else:
            assert client.exists(f"{name}:crawldedup-bloom:meta") == 1
    finally:
        # the queues, the Bloom filter's keys or the store's (its metadata
        # under the name, its buckets under the name's hash tag)
        keys = client.keys(f"{name}:*") + client.keys(f"{{{name}:*")
        if keys:
            client.delete(*keys)
        client.close()


@pytest.mark.parametrize("backend, settings, again", [
    ("redis", {}, True),                   # default: deleted when the crawl closes
    ("redis-bloom", {}, True),
    ("redis", {"CRAWLDEDUP_REDIS_PERSIST": "True"}, False),
    ("redis", {"SCHEDULER_PERSIST": "True"}, False),  # scrapy-redis's name, read too
    ("redis", {"CRAWLDEDUP_REDIS_PERSIST": "True", "CRAWLDEDUP_REDIS_FLUSH_ON_START": "True"},
     True),
])
def test_redis_filter_kept_or_cleared_across_crawls(tmp_path, redis_url, backend, settings, again):
    """Two crawls in a row of the local site with a Redis backend and Scrapy's
    scheduler, no JOBDIR.  By default the filter is deleted when a crawl
    closes, so the second crawl fetches every page again; kept
    (CRAWLDEDUP_REDIS_PERSIST, or scrapy-redis's SCHEDULER_PERSIST), the
    second crawl fetches nothing; kept but flushed on start, it fetches every
    page again."""
    import uuid

    import redis
    pages = 200
    expected = expected_keys(pages)
    name = f"test-crawldedup-{uuid.uuid4().hex[:12]}"
    all_settings = {**OURS, "CRAWLDEDUP_DUPEFILTER": backend, "CRAWLDEDUP_REDIS_URL": redis_url,
                    "CRAWLDEDUP_CAPACITY": "100000", "CRAWLDEDUP_ERROR_RATE": "1e-7", **settings}
    kept = settings.get("CRAWLDEDUP_REDIS_PERSIST") or settings.get("SCHEDULER_PERSIST")
    client = redis.Redis.from_url(redis_url)
    try:
        with Site(pages) as site:
            for run in (1, 2):
                result = run_crawl(str(tmp_path), site.root, all_settings,
                                   str(tmp_path / f"s{run}.json"), name=name)
                assert result.returncode == 0, result.stderr[-3000:]
                assert read_stats(str(tmp_path / f"s{run}.json"))["reason"] == "finished"
                held = set(client.keys(f"{name}:*")) | set(client.keys(f"{{{name}:*"))
                # a cleared RedisStore keeps its metadata key (its layout)
                held.discard(f"{name}:crawldedup-seen:meta".encode())
                assert bool(held) == bool(kept)
                if run == 1:
                    assert site.counts == {key: 1 for key in expected}
            assert site.counts == {key: 2 if again else 1 for key in expected}
        if kept and not again:
            assert "holds about" in result.stderr  # the second crawl says why it fetched nothing
    finally:
        keys = client.keys(f"{name}:*") + client.keys(f"{{{name}:*")
        if keys:
            client.delete(*keys)
        client.close()
