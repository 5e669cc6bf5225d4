"""crawldedup.scrapy.DupeFilter in process: the same decisions as Scrapy's
RFPDupeFilter, JOBDIR state, requests.seen import, logs, stats, signals and
bad settings.  The real crawls are in test_scrapy_crawl.py."""

import logging
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import require_module

require_module("scrapy")

from scrapy import Request, Spider, signals  # noqa: E402
from scrapy.dupefilters import RFPDupeFilter  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from crawldedup import CorruptFileError, FingerprintSet  # noqa: E402
from crawldedup.scrapy import DupeFilter  # noqa: E402
from crawldedup.scrapy import dupefilter as dfmod  # noqa: E402
from crawldedup.scrapy.dupefilter import (  # noqa: E402
    BLOOM_FILE,
    EXACT_FILE,
    DupeFilterConfigError,
    read_requests_seen,
)

FINGERPRINTER = "crawldedup.scrapy.RequestFingerprinter"


def crawler(**settings):
    settings.setdefault("REQUEST_FINGERPRINTER_CLASS", FINGERPRINTER)
    return get_crawler(Spider, settings_dict=settings)


def make(**settings):
    c = crawler(**settings)
    return c, DupeFilter.from_crawler(c)


paths = st.sampled_from(["/", "/a", "/a/", "/b?x=1&y=2", "/b?y=2&x=1", "/b?x=1", "/c#f",
                         "/c", "/d?utm_source=x", "/%7Euser", "/~user", "/e?q=a+b", "/e?q=a%20b"])
request_specs = st.tuples(paths, st.sampled_from(["GET", "POST"]),
                          st.sampled_from([b"", b"x", b"y"]))


@pytest.mark.parametrize("backend", ["exact", "bloom"])
@given(specs=st.lists(request_specs, max_size=30))
def test_same_decisions_as_scrapy(backend, specs):
    _, ours = make(CRAWLDEDUP_DUPEFILTER=backend, CRAWLDEDUP_CAPACITY=10_000,
                   CRAWLDEDUP_ERROR_RATE=1e-9)
    theirs = RFPDupeFilter()
    for path, method, body in specs:
        a = Request("https://example.com" + path, method=method, body=body)
        b = Request("https://example.com" + path, method=method, body=body)
        assert ours.request_seen(a) == theirs.request_seen(b), (path, method, body)
    assert len(ours) == len(theirs._fingerprints)
    ours.close("finished")


def test_log_and_stats(caplog):
    c, df = make()
    spider = Spider("s")
    spider.crawler = c
    first = Request("https://example.com/x?b=1&a=2")
    assert df.request_seen(first) is False
    with caplog.at_level(logging.DEBUG, logger="scrapy.dupefilters"):
        for _ in range(3):
            dup = Request("https://example.com/x?a=2&b=1", headers={"Referer": "https://r.example/"})
            assert df.request_seen(dup) is True
            df.log(dup, spider)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and "Filtered duplicate request" in messages[0]
    assert "no more duplicates will be shown" in messages[0]
    assert c.stats.get_value("dupefilter/filtered") == 3

    caplog.clear()
    c, df = make(DUPEFILTER_DEBUG=True)
    spider.crawler = c
    df.request_seen(first)
    with caplog.at_level(logging.DEBUG, logger="scrapy.dupefilters"):
        for _ in range(2):
            df.request_seen(dup)
            df.log(dup, spider)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and all("referer: https://r.example/" in m for m in messages)
    assert c.stats.get_value("dupefilter/filtered") == 2


def test_logs_reach_a_logging_config_made_for_scrapys_filter():
    """A handler and level set on Scrapy's filter's logger (scrapy.dupefilters)
    apply to this filter's messages, as they do to RFPDupeFilter's."""
    c, df = make(CRAWLDEDUP_DUPEFILTER="bloom", CRAWLDEDUP_CAPACITY=10)
    spider = Spider("s")
    spider.crawler = c
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Keep()
    scrapy_logger = logging.getLogger("scrapy.dupefilters")
    old_level = scrapy_logger.level
    scrapy_logger.addHandler(handler)
    try:
        scrapy_logger.setLevel(logging.DEBUG)
        df.request_seen(Request("https://example.com/"))
        df.log(Request("https://example.com/"), spider)
        assert [r.getMessage()[:26] for r in records] == ["Filtered duplicate request"]
        for i in range(20):  # past the capacity: a warning
            df.request_seen(Request(f"https://example.com/{i}"))
        assert "more than its capacity" in records[-1].getMessage()
        # a level set for Scrapy's filter silences ours too
        scrapy_logger.setLevel(logging.ERROR)
        del records[:]
        df2 = DupeFilter(debug=True)
        df2.request_seen(Request("https://example.com/"))
        df2.log(Request("https://example.com/"), spider)
        assert records == []
        df2.close()
    finally:
        scrapy_logger.removeHandler(handler)
        scrapy_logger.setLevel(old_level)
    df.close("finished")


@pytest.mark.parametrize("backend, jobdir", [("exact", False), ("exact", True), ("bloom", False),
                                             ("bloom", True), ("redis", False),
                                             ("redis-bloom", False)])
def test_len_and_repr_after_close(backend, jobdir, tmp_path, request):
    """Every backend: len() is the count while open, 0 once closed (a closed
    Redis backend asks no server), and repr() says it is closed."""
    settings = {"CRAWLDEDUP_DUPEFILTER": backend, "CRAWLDEDUP_CAPACITY": 1000}
    if backend.startswith("redis"):
        settings["CRAWLDEDUP_REDIS_URL"] = request.getfixturevalue("redis_url")
        settings["CRAWLDEDUP_REDIS_KEY"] = request.getfixturevalue("redis_key")
    if jobdir:
        settings["JOBDIR"] = str(tmp_path / "job")
    _, df = make(**settings)
    df.request_seen(Request("https://example.com/a"))
    df.request_seen(Request("https://example.com/b"))
    assert len(df) == 2
    assert repr(df).endswith("len=2)")
    if backend.startswith("redis"):
        df.clear()  # leave nothing in the shared server
    df.close("finished")
    assert len(df) == 0
    assert repr(df) == f"DupeFilter(backend={backend!r}, jobdir={df.jobdir!r}, closed)"
    df.close("finished")  # a second close does nothing
    assert len(df) == 0


def test_uses_the_crawlers_fingerprinter():
    c, df = make(REQUEST_FINGERPRINTER_CLASS="scrapy.utils.request.RequestFingerprinter")
    assert df.fingerprinter is c.request_fingerprinter
    assert df.request_seen(Request("https://example.com/?b=1&a=2")) is False
    assert df.request_seen(Request("https://example.com/?a=2&b=1")) is True


class SizedFingerprinter:
    """A user fingerprinter with 32-byte fingerprints."""

    def fingerprint(self, request):
        import hashlib
        return hashlib.sha256(request.url.encode()).digest()


@pytest.mark.parametrize("backend", ["exact", "bloom"])
def test_fingerprints_of_another_size(backend):
    df = DupeFilter(backend, fingerprinter=SizedFingerprinter())
    assert df.request_seen(Request("https://example.com/a")) is False
    assert df.request_seen(Request("https://example.com/a")) is True
    assert df.request_seen(Request("https://example.com/b")) is False
    assert len(df) == 2


# --------------------------------------------------------------- JOBDIR

def test_exact_jobdir_survives_close_and_reopen(tmp_path):
    job = str(tmp_path / "job")
    c, df = make(JOBDIR=job)
    for i in range(100):
        assert df.request_seen(Request(f"https://example.com/{i}")) is False
    c.signals.send_catch_log(signals.spider_closed, spider=Spider("s"), reason="shutdown")
    assert df._closed
    saved = FingerprintSet.load(os.path.join(job, EXACT_FILE))
    assert len(saved) == 100 and not os.path.exists(os.path.join(job, EXACT_FILE + ".log"))
    df.close("again")  # a second close does nothing

    c, df = make(JOBDIR=job)
    assert len(df) == 100
    assert df.request_seen(Request("https://example.com/5")) is True
    assert df.request_seen(Request("https://example.com/100")) is False
    df.close("finished")


def test_exact_journal_replayed_after_a_kill(tmp_path):
    job = str(tmp_path)
    _, df = make(JOBDIR=job)
    for i in range(50):
        df.request_seen(Request(f"https://example.com/{i}"))
    df._backend.flush()  # what is on disk when the process dies without closing
    journal = os.path.join(job, EXACT_FILE + ".log")
    with open(journal, "ab") as f:
        f.write(b"\x01" * 7)  # a torn last record
    _, again = make(JOBDIR=job)
    assert len(again) == 50
    assert os.path.getsize(journal) == 50 * 20
    assert again.request_seen(Request("https://example.com/49")) is True
    again.close("finished")
    df._backend.journaled.log.close()  # the killed process's file, left open


def test_bloom_jobdir_is_mapped_and_kept(tmp_path):
    job = str(tmp_path)
    settings = {"JOBDIR": job, "CRAWLDEDUP_DUPEFILTER": "bloom", "CRAWLDEDUP_CAPACITY": 1000,
                "CRAWLDEDUP_ERROR_RATE": 1e-6}
    _, df = make(**settings)
    assert df._backend.bf.path == os.path.join(job, BLOOM_FILE)
    for i in range(20):
        assert df.request_seen(Request(f"https://example.com/{i}")) is False
    df.close("shutdown")
    _, df = make(**settings)
    assert df.request_seen(Request("https://example.com/3")) is True
    assert df.request_seen(Request("https://example.com/20")) is False
    df.close("finished")
    # other parameters than the file's: refused at start-up
    with pytest.raises(DupeFilterConfigError, match="CRAWLDEDUP_CAPACITY"):
        DupeFilter("bloom", jobdir=job, settings=crawler(CRAWLDEDUP_CAPACITY=5000).settings)
    # a Bloom JOBDIR cannot become exact
    with pytest.raises(DupeFilterConfigError, match="cannot list its fingerprints"):
        DupeFilter("exact", jobdir=job)


def test_bloom_warns_past_capacity(caplog):
    _, df = make(CRAWLDEDUP_DUPEFILTER="bloom", CRAWLDEDUP_CAPACITY=10,
                 CRAWLDEDUP_ERROR_RATE=0.01)
    with caplog.at_level(logging.WARNING, logger="scrapy.dupefilters"):
        for i in range(10):
            df.request_seen(Request(f"https://example.com/{i}"))
        assert not caplog.records
        for i in range(10, 30):
            df.request_seen(Request(f"https://example.com/{i}"))
    assert len(caplog.records) == 1 and "more than its capacity" in caplog.records[0].getMessage()


def scrapy_jobdir(job, n, hex_lines=False):
    """A requests.seen written by Scrapy's own RFPDupeFilter (or, for the
    older format, hex lines as older Scrapy versions wrote them)."""
    reqs = [Request(f"https://example.com/page/{i}") for i in range(n)]
    theirs = RFPDupeFilter(job)
    for r in reqs:
        theirs.request_seen(r)
    theirs.close("shutdown")
    path = os.path.join(job, "requests.seen")
    if hex_lines:
        fps = list(read_requests_seen(path))
        with open(path, "w") as f:
            f.write("".join(fp.hex() + "\n" for fp in fps))
    return reqs, path


@pytest.mark.parametrize("hex_lines", [False, True])
@pytest.mark.parametrize("backend", ["exact", "bloom"])
def test_imports_scrapys_requests_seen(tmp_path, backend, hex_lines):
    job = str(tmp_path)
    reqs, path = scrapy_jobdir(job, 300, hex_lines)
    with open(path, "rb") as f:
        assert (f.read(1) == b"\x00") != hex_lines  # the format written as asked
    _, df = make(JOBDIR=job, CRAWLDEDUP_DUPEFILTER=backend, CRAWLDEDUP_CAPACITY=10_000,
                 CRAWLDEDUP_ERROR_RATE=1e-9)
    assert all(df.request_seen(r) for r in reqs)
    assert df.request_seen(Request("https://example.com/page/300")) is False
    df.close("shutdown")
    os.unlink(path)  # the state is crawldedup's own now
    _, df = make(JOBDIR=job, CRAWLDEDUP_DUPEFILTER=backend, CRAWLDEDUP_CAPACITY=10_000,
                 CRAWLDEDUP_ERROR_RATE=1e-9)
    assert all(df.request_seen(r) for r in reqs)
    df.close("finished")


def test_requests_seen_torn_and_damaged(tmp_path):
    job = str(tmp_path)
    _, path = scrapy_jobdir(job, 10)
    with open(path, "ab") as f:
        f.write(b"\x00\x14" + b"\x05" * 7)  # killed in the middle of a record
    assert len(list(read_requests_seen(path))) == 10
    with open(path, "w") as f:
        f.write("00" * 20 + "\n" + "not hex\n" + "ab" * 20 + "\n")
    with pytest.raises(DupeFilterConfigError, match="line 2 is not a hex fingerprint"):
        DupeFilter(jobdir=job)
    with open(path, "w") as f:
        f.write("00" * 20 + "\n" + "ab" * 7)  # torn last line
    assert list(read_requests_seen(path)) == [b"\x00" * 20]
    with open(path, "wb") as f:
        f.write(b"\x00\x00\x00\x14")
    with pytest.raises(DupeFilterConfigError, match="length 0"):
        list(read_requests_seen(path))


def test_exact_state_switches_to_bloom(tmp_path):
    job = str(tmp_path)
    _, df = make(JOBDIR=job)
    for i in range(30):
        df.request_seen(Request(f"https://example.com/{i}"))
    df.close("shutdown")
    _, df = make(JOBDIR=job, CRAWLDEDUP_DUPEFILTER="bloom", CRAWLDEDUP_CAPACITY=1000,
                 CRAWLDEDUP_ERROR_RATE=1e-9)
    assert all(df.request_seen(Request(f"https://example.com/{i}")) for i in range(30))
    df.close("finished")


def test_damaged_state_file_is_an_error(tmp_path):
    with open(tmp_path / EXACT_FILE, "wb") as f:
        f.write(b"garbage" * 1000)
    with pytest.raises(CorruptFileError):
        DupeFilter(jobdir=str(tmp_path))


# --------------------------------------------------------------- clear, bad settings

@pytest.mark.parametrize("backend", ["exact", "bloom"])
def test_clear(tmp_path, backend):
    df = DupeFilter(backend, jobdir=str(tmp_path))
    df.request_seen(Request("https://example.com/"))
    df.clear()
    assert df.request_seen(Request("https://example.com/")) is False
    df.close("finished")


@pytest.mark.parametrize("settings, message", [
    ({"CRAWLDEDUP_DUPEFILTER": "nope"}, "CRAWLDEDUP_DUPEFILTER must be one of"),
    ({"CRAWLDEDUP_DUPEFILTER": "bloom", "CRAWLDEDUP_CAPACITY": 0}, "CRAWLDEDUP_CAPACITY must be"),
    ({"CRAWLDEDUP_DUPEFILTER": "bloom", "CRAWLDEDUP_CAPACITY": "lots"}, "CRAWLDEDUP_CAPACITY"),
    ({"CRAWLDEDUP_DUPEFILTER": "bloom", "CRAWLDEDUP_CAPACITY": 2.5}, "CRAWLDEDUP_CAPACITY"),
    ({"CRAWLDEDUP_DUPEFILTER": "bloom", "CRAWLDEDUP_ERROR_RATE": 1.5}, "CRAWLDEDUP_ERROR_RATE"),
    ({"CRAWLDEDUP_DUPEFILTER": "bloom", "CRAWLDEDUP_ERROR_RATE": 0}, "CRAWLDEDUP_ERROR_RATE"),
])
def test_bad_settings(settings, message, caplog):
    c = crawler(**settings)
    with pytest.raises(DupeFilterConfigError, match=message):
        DupeFilter(settings["CRAWLDEDUP_DUPEFILTER"], settings=c.settings)
    # from a crawler: a filter that lets nothing through and stops the crawl
    df = DupeFilter.from_crawler(c)
    with pytest.raises(DupeFilterConfigError, match=message):
        df.request_seen(Request("https://example.com/"))
    with caplog.at_level(logging.ERROR, logger="scrapy.dupefilters"):
        results = c.signals.send_catch_log(signals.spider_opened, spider=Spider("s"),
                                           dont_log=Exception)
    from scrapy.exceptions import CloseSpider
    failures = [r for _, r in results if hasattr(r, "value") and isinstance(r.value, CloseSpider)]
    assert len(failures) == 1 and failures[0].value.reason == dfmod.CONFIG_ERROR_REASON
    assert [r.getMessage() for r in caplog.records if message in r.getMessage()]


# --------------------------------------------------------------- redis

@pytest.fixture
def redis_key(redis_url):
    import uuid

    import redis
    key = f"test-crawldedup-scrapy-{uuid.uuid4().hex}"
    yield key
    client = redis.Redis.from_url(redis_url)
    # a Bloom filter's keys, a store's metadata and its keys
    client.delete(key, *client.keys(f"{key}:*"), *client.keys(f"{{{key}}}:*"))
    client.close()


def store_keys(client, name):
    """The keys of the RedisStore ``name`` besides its metadata: the
    buckets, counter and receipts under each of its slot groups' prefixes
    (docs/redis.md, "RedisStore"); none without the metadata."""
    import json

    from crawldedup.redis._keys import group_prefixes
    raw = client.get(f"{name}:meta")
    if raw is None:
        return set()
    meta = json.loads(raw)
    assert meta["kind"] == "store" and meta["layout"] == "buckets", meta
    return {key for prefix in group_prefixes(name.encode(), meta["groups"])
            for key in client.scan_iter(match=prefix + b"*", count=1000)}


def test_redis_backend_is_shared(redis_url, redis_key):
    settings = {"CRAWLDEDUP_DUPEFILTER": "redis", "CRAWLDEDUP_REDIS_URL": redis_url,
                "CRAWLDEDUP_REDIS_KEY": redis_key}
    _, a = make(**settings)
    _, b = make(**settings)
    assert a.backend == "redis"
    assert a.request_seen(Request("https://example.com/?b=1&a=2")) is False
    assert b.request_seen(Request("https://example.com/?a=2&b=1")) is True
    assert b.request_seen(Request("https://example.com/other")) is False
    assert a.request_seen(Request("https://example.com/other")) is True
    assert len(a) == 2
    a.close("finished")
    b.clear()
    assert b.request_seen(Request("https://example.com/other")) is False
    b.close("finished")


def test_redis_key_follows_the_spider(redis_url):
    import redis

    from crawldedup.redis import RedisStore
    name = "test-crawldedup-spider-key:crawldedup-seen"
    client = redis.Redis.from_url(redis_url)
    c = crawler(CRAWLDEDUP_DUPEFILTER="redis", CRAWLDEDUP_REDIS_URL=redis_url)
    c.spider = Spider("test-crawldedup-spider-key")
    df = DupeFilter.from_crawler(c)
    try:
        assert df._backend.key == name
        df.request_seen(Request("https://example.com/"))
        # the store under the spider's name holds the fingerprint
        with RedisStore(redis_url, name, 20) as store:
            assert len(store) == 1
        assert store_keys(client, name)
    finally:
        df.clear()
        df.close("finished")
        client.delete(f"{name}:meta")
        client.close()


def test_redis_unreachable_or_wrong_key(redis_url, redis_key):
    from crawldedup import StoreUnavailableError
    with pytest.raises(StoreUnavailableError, match="127.0.0.1:1"):
        DupeFilter("redis", settings=crawler(CRAWLDEDUP_REDIS_URL="redis://127.0.0.1:1",
                                             CRAWLDEDUP_REDIS_KEY="k").settings)
    c = crawler(CRAWLDEDUP_DUPEFILTER="redis", CRAWLDEDUP_REDIS_URL="redis://127.0.0.1:1",
                CRAWLDEDUP_REDIS_KEY="k")
    df = DupeFilter.from_crawler(c)
    with pytest.raises(StoreUnavailableError):
        df.request_seen(Request("https://example.com/"))
    import redis
    client = redis.Redis.from_url(redis_url)
    client.set(redis_key, "a string, not a set")
    client.close()
    with pytest.raises(DupeFilterConfigError, match=redis_key):
        DupeFilter("redis", settings=crawler(CRAWLDEDUP_REDIS_URL=redis_url,
                                             CRAWLDEDUP_REDIS_KEY=redis_key).settings)


@pytest.mark.parametrize("backend", ["redis", "redis-bloom"])
@pytest.mark.parametrize("settings, kept", [
    ({}, False),
    ({"JOBDIR": True}, True),                      # a job paused and resumed keeps it
    ({"JOBDIR": True, "CRAWLDEDUP_REDIS_PERSIST": False}, False),
    ({"SCHEDULER_PERSIST": True}, True),
    ({"SCHEDULER_PERSIST": True, "CRAWLDEDUP_REDIS_PERSIST": "False"}, False),  # ours first
])
def test_redis_filter_kept_on_close(redis_url, redis_key, tmp_path, backend, settings, kept):
    import redis
    settings = dict(settings)
    if settings.get("JOBDIR"):
        settings["JOBDIR"] = str(tmp_path / "job")
    _, df = make(CRAWLDEDUP_DUPEFILTER=backend, CRAWLDEDUP_REDIS_URL=redis_url,
                 CRAWLDEDUP_REDIS_KEY=redis_key, CRAWLDEDUP_CAPACITY=1000, **settings)
    df.request_seen(Request("https://example.com/"))
    df.close("finished")
    client = redis.Redis.from_url(redis_url)
    try:
        if backend == "redis":
            # the digests' keys; the store's metadata stays (its layout)
            assert bool(store_keys(client, redis_key)) == kept
        else:
            assert bool(client.keys(f"{redis_key}*")) == kept
        _, again = make(CRAWLDEDUP_DUPEFILTER=backend, CRAWLDEDUP_REDIS_URL=redis_url,
                        CRAWLDEDUP_REDIS_KEY=redis_key, CRAWLDEDUP_CAPACITY=1000,
                        CRAWLDEDUP_REDIS_PERSIST=True)
        assert again.request_seen(Request("https://example.com/")) is kept
        again.close("finished")
        # flushed on start (ours, or scrapy-redis's name): starts empty
        for flush in ({"CRAWLDEDUP_REDIS_FLUSH_ON_START": True}, {"SCHEDULER_FLUSH_ON_START": "1"}):
            _, flushed = make(CRAWLDEDUP_DUPEFILTER=backend, CRAWLDEDUP_REDIS_URL=redis_url,
                              CRAWLDEDUP_REDIS_KEY=redis_key, CRAWLDEDUP_CAPACITY=1000,
                              CRAWLDEDUP_REDIS_PERSIST=True, **flush)
            assert flushed.request_seen(Request("https://example.com/")) is False
            flushed.close("finished")
    finally:
        client.close()


@pytest.mark.parametrize("name", ["CRAWLDEDUP_REDIS_PERSIST", "CRAWLDEDUP_REDIS_FLUSH_ON_START",
                                  "SCHEDULER_PERSIST"])
def test_redis_persist_settings_must_be_booleans(redis_url, redis_key, name):
    with pytest.raises(DupeFilterConfigError, match=f"{name} must be True or False, got 'maybe'"):
        DupeFilter("redis", settings=crawler(CRAWLDEDUP_REDIS_URL=redis_url,
                                             CRAWLDEDUP_REDIS_KEY=redis_key,
                                             **{name: "maybe"}).settings)


# scrapy-redis 0.9 passes spider= to the stats, which Scrapy 2.19 deprecates
@pytest.mark.filterwarnings("ignore:Passing a 'spider' argument")
def test_under_scrapy_redis_scheduler(redis_url):
    require_module("scrapy_redis")
    import redis
    from scrapy_redis.scheduler import Scheduler

    from crawldedup.redis import RedisStore
    name = "test-crawldedup-scrapy-redis"
    c = crawler(CRAWLDEDUP_DUPEFILTER="redis", REDIS_URL=redis_url,
                SCHEDULER="scrapy_redis.scheduler.Scheduler",
                DUPEFILTER_CLASS="crawldedup.scrapy.DupeFilter")
    spider = Spider(name)
    spider.crawler = c
    spider.settings = c.settings
    scheduler = Scheduler.from_crawler(c)
    scheduler.open(spider)
    client = redis.Redis.from_url(redis_url)
    try:
        assert isinstance(scheduler.df, DupeFilter)
        assert scheduler.df._backend.key == f"{name}:crawldedup-seen"
        assert scheduler.enqueue_request(Request("https://example.com/?b=1&a=2")) is True
        assert scheduler.enqueue_request(Request("https://example.com/?a=2&b=1")) is False
        assert scheduler.enqueue_request(Request("https://example.com/?a=2&b=1",
                                                 dont_filter=True)) is True
        assert len(scheduler) == 2
        with RedisStore(redis_url, f"{name}:crawldedup-seen", 20) as store:
            assert len(store) == 1
        scheduler.close("finished")  # not SCHEDULER_PERSIST: flushes queue and filter
        assert store_keys(client, f"{name}:crawldedup-seen") == set()
        assert client.exists(f"{name}:requests") == 0
    finally:
        client.delete(*store_keys(client, f"{name}:crawldedup-seen"),
                      f"{name}:crawldedup-seen:meta", f"{name}:requests")
        client.close()


# --------------------------------------------------------- redis-bloom

def test_redis_bloom_backend_is_shared(redis_url, redis_key):
    settings = {"CRAWLDEDUP_DUPEFILTER": "redis-bloom", "CRAWLDEDUP_REDIS_URL": redis_url,
                "CRAWLDEDUP_REDIS_KEY": redis_key, "CRAWLDEDUP_CAPACITY": 10_000,
                "CRAWLDEDUP_ERROR_RATE": 0.001}
    _, a = make(**settings)
    _, b = make(**settings)
    assert a.backend == "redis-bloom"
    assert a.request_seen(Request("https://example.com/?b=1&a=2")) is False
    assert b.request_seen(Request("https://example.com/?a=2&b=1")) is True
    assert b.request_seen(Request("https://example.com/other")) is False
    assert a.request_seen(Request("https://example.com/other")) is True
    assert len(a) == 2  # the filter's estimate, exact at this fill
    import redis
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.exists(f"{redis_key}:meta") == 1
        assert not client.exists(f"{redis_key}")  # no set: the bits live in shard keys
    finally:
        client.close()
    a.close("finished")
    b.clear()
    assert b.request_seen(Request("https://example.com/other")) is False
    b.close("finished")


def test_redis_bloom_false_positive_rate_and_capacity_warning(redis_url, redis_key, caplog):
    from crawldedup.scrapy import _redis_backend
    settings = {"CRAWLDEDUP_DUPEFILTER": "redis-bloom", "CRAWLDEDUP_REDIS_URL": redis_url,
                "CRAWLDEDUP_REDIS_KEY": redis_key, "CRAWLDEDUP_CAPACITY": 2_000,
                "CRAWLDEDUP_ERROR_RATE": 0.01}
    _, df = make(**settings)
    try:
        with caplog.at_level("WARNING", logger="scrapy.dupefilters"):
            fresh = [df.request_seen(Request(f"https://example.com/p/{i}")) for i in range(2_000)]
            # under capacity: at most a few false positives (1% expected), no warning
            assert sum(fresh) <= 60
            assert "more than its capacity" not in caplog.text
            _redis_backend.CAPACITY_CHECK_EVERY, saved = 500, _redis_backend.CAPACITY_CHECK_EVERY
            try:
                for i in range(2_000, 4_000):
                    df.request_seen(Request(f"https://example.com/p/{i}"))
            finally:
                _redis_backend.CAPACITY_CHECK_EVERY = saved
        assert "more than its capacity (CRAWLDEDUP_CAPACITY = 2000)" in caplog.text
        # every request seen before is still seen: no false negatives
        assert all(df.request_seen(Request(f"https://example.com/p/{i}")) for i in range(4_000))
    finally:
        df.close("finished")


def test_redis_bloom_other_parameters_or_wrong_keys(redis_url, redis_key):
    from crawldedup import StoreUnavailableError
    base = {"CRAWLDEDUP_REDIS_URL": redis_url, "CRAWLDEDUP_REDIS_KEY": redis_key,
            "CRAWLDEDUP_REDIS_PERSIST": True}
    DupeFilter("redis-bloom", settings=crawler(**base, CRAWLDEDUP_CAPACITY=1_000).settings
               ).close("finished")
    with pytest.raises(DupeFilterConfigError, match="CRAWLDEDUP_CAPACITY"):
        DupeFilter("redis-bloom", settings=crawler(**base, CRAWLDEDUP_CAPACITY=5_000).settings)
    with pytest.raises(DupeFilterConfigError, match="CRAWLDEDUP_CAPACITY"):
        DupeFilter("redis-bloom", settings=crawler(**base, CRAWLDEDUP_CAPACITY=0).settings)
    with pytest.raises(StoreUnavailableError, match="127.0.0.1:1"):
        DupeFilter("redis-bloom", settings=crawler(CRAWLDEDUP_REDIS_URL="redis://127.0.0.1:1",
                                                   CRAWLDEDUP_REDIS_KEY="k").settings)
    import redis
    client = redis.Redis.from_url(redis_url)
    try:
        client.rpush(f"{redis_key}-list:meta", "a list, not a filter")
        with pytest.raises(DupeFilterConfigError, match=f"{redis_key}-list"):
            DupeFilter("redis-bloom", settings=crawler(
                CRAWLDEDUP_REDIS_URL=redis_url, CRAWLDEDUP_REDIS_KEY=f"{redis_key}-list"
            ).settings)
    finally:
        client.delete(f"{redis_key}-list:meta")
        client.close()


def test_redis_redis_key_follows_the_spider(redis_url):
    import redis
    c = crawler(CRAWLDEDUP_DUPEFILTER="redis-bloom", CRAWLDEDUP_REDIS_URL=redis_url,
                CRAWLDEDUP_CAPACITY=1_000)
    c.spider = Spider("test-crawldedup-spider-bloom")
    df = DupeFilter.from_crawler(c)
    client = redis.Redis.from_url(redis_url)
    try:
        assert df._backend.key == "test-crawldedup-spider-bloom:crawldedup-bloom"
        assert df.request_seen(Request("https://example.com/")) is False
        assert client.exists("test-crawldedup-spider-bloom:crawldedup-bloom:meta") == 1
    finally:
        df.close("finished")  # not kept (CRAWLDEDUP_REDIS_PERSIST): its keys deleted
        assert client.keys("test-crawldedup-spider-bloom:*") == []
        client.close()


def test_a_fingerprinter_subclass_is_asked_itself():
    # The filter skips the fingerprint cache of crawldedup's own fingerprinter,
    # but a subclass that overrides fingerprint() is called as it is.
    from crawldedup.scrapy import RequestFingerprinter

    class ByPath(RequestFingerprinter):
        def fingerprint(self, request):
            return request.url.split("?")[0].encode().ljust(20, b"-")[:20]

    df = DupeFilter("exact", fingerprinter=ByPath())
    try:
        assert df.request_seen(Request("https://e.com/a?x=1")) is False
        assert df.request_seen(Request("https://e.com/a?x=2")) is True  # same path
    finally:
        df.close("finished")
    plain = DupeFilter("exact", fingerprinter=RequestFingerprinter())
    try:
        assert plain.request_seen(Request("https://e.com/a?x=1")) is False
        assert plain.request_seen(Request("https://e.com/a?x=2")) is False
        assert plain.request_seen(Request("https://e.com/a?x=1")) is True
    finally:
        plain.close("finished")
