"""The "disk" backend of crawldedup.scrapy.DupeFilter: a DiskStore in JOBDIR
(or a temporary folder), the same decisions as Scrapy's RFPDupeFilter,
pause and resume, a kill, and the import of requests.seen and of the
"exact" backend's state."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import examples, require_module

require_module("scrapy")

from scrapy import Request, Spider, signals  # noqa: E402
from scrapy.dupefilters import RFPDupeFilter  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from crawldedup import StoreLockedError  # noqa: E402
from crawldedup.scrapy import DupeFilter  # noqa: E402
from crawldedup.scrapy.dupefilter import BLOOM_FILE, DupeFilterConfigError  # noqa: E402

FINGERPRINTER = "crawldedup.scrapy.RequestFingerprinter"
FOLDER = "crawldedup-seen.disk"


def make(**settings):
    settings.setdefault("REQUEST_FINGERPRINTER_CLASS", FINGERPRINTER)
    settings.setdefault("CRAWLDEDUP_DUPEFILTER", "disk")
    c = get_crawler(Spider, settings_dict=settings)
    return c, DupeFilter.from_crawler(c)


PATHS = st.sampled_from(["/", "/a", "/a/", "/b?x=1&y=2", "/b?y=2&x=1", "/c#f", "/c",
                         "/%7Euser", "/~user"])


@given(specs=st.lists(st.tuples(PATHS, st.sampled_from(["GET", "POST"])), max_size=30))
def test_same_decisions_as_scrapy(specs):
    _, ours = make()
    theirs = RFPDupeFilter()
    folder = ours._backend.temporary
    assert folder is not None and os.path.isdir(folder)
    for path, method in specs:
        a = Request("https://example.com" + path, method=method)
        b = Request("https://example.com" + path, method=method)
        assert ours.request_seen(a) == theirs.request_seen(b), (path, method)
    assert len(ours) == len(theirs._fingerprints)
    ours.close("finished")
    assert not os.path.exists(folder)  # the temporary store goes with the crawl


def test_jobdir_pause_and_resume(tmp_path):
    job = str(tmp_path / "job")
    c, df = make(JOBDIR=job, CRAWLDEDUP_DISK_MEMORY=1 << 20)
    for i in range(3000):
        assert df.request_seen(Request(f"https://example.com/{i}")) is False
    c.signals.send_catch_log(signals.spider_closed, spider=Spider("s"), reason="shutdown")
    assert df._closed and os.path.isdir(os.path.join(job, FOLDER))
    c, df = make(JOBDIR=job, CRAWLDEDUP_DISK_MEMORY=1 << 20)
    assert len(df) == 3000
    assert df.request_seen(Request("https://example.com/5")) is True
    assert df.request_seen(Request("https://example.com/3000")) is False
    df.clear()
    assert len(df) == 0 and df.request_seen(Request("https://example.com/5")) is False
    df.close("finished")


@pytest.mark.parametrize("previous", ["scrapy", "exact"])
def test_imports_what_the_jobdir_holds(tmp_path, previous):
    job = str(tmp_path)
    reqs = [Request(f"https://example.com/page/{i}") for i in range(300)]
    if previous == "scrapy":
        theirs = RFPDupeFilter(job)
    else:
        _, theirs = make(JOBDIR=job, CRAWLDEDUP_DUPEFILTER="exact")
    for r in reqs:
        theirs.request_seen(r)
    theirs.close("shutdown")
    _, df = make(JOBDIR=job)
    assert all(df.request_seen(r) for r in reqs)
    assert df.request_seen(Request("https://example.com/page/300")) is False
    df.close("finished")


def test_a_bloom_jobdir_is_refused(tmp_path):
    job = str(tmp_path)
    _, bloom = make(JOBDIR=job, CRAWLDEDUP_DUPEFILTER="bloom", CRAWLDEDUP_CAPACITY=1000)
    bloom.request_seen(Request("https://example.com/"))
    bloom.close("shutdown")
    assert os.path.exists(os.path.join(job, BLOOM_FILE))
    _, df = make(JOBDIR=job)  # a filter that lets nothing through and stops the crawl
    with pytest.raises(DupeFilterConfigError, match="'disk'"):
        df.request_seen(Request("https://example.com/"))


def test_bad_memory_setting(tmp_path):
    _, df = make(JOBDIR=str(tmp_path), CRAWLDEDUP_DISK_MEMORY="lots")
    with pytest.raises(DupeFilterConfigError, match="CRAWLDEDUP_DISK_MEMORY"):
        df.request_seen(Request("https://example.com/"))


def test_one_crawl_at_a_time_on_a_jobdir(tmp_path):
    _, first = make(JOBDIR=str(tmp_path))
    _, second = make(JOBDIR=str(tmp_path))
    with pytest.raises(StoreLockedError, match="another process"):
        second.request_seen(Request("https://example.com/"))
    assert first.request_seen(Request("https://example.com/")) is False
    first.close("finished")


CRAWLER = textwrap.dedent("""
    import sys
    from scrapy import Request, Spider
    from scrapy.utils.test import get_crawler
    from crawldedup.scrapy import DupeFilter
    c = get_crawler(Spider, settings_dict={{"JOBDIR": {job!r}, "CRAWLDEDUP_DUPEFILTER": "disk",
        "CRAWLDEDUP_DISK_MEMORY": 1 << 20,
        "REQUEST_FINGERPRINTER_CLASS": "crawldedup.scrapy.RequestFingerprinter"}})
    df = DupeFilter.from_crawler(c)
    for i in range(10**7):
        df.request_seen(Request(f"https://example.com/{{i}}"))
        if i % 500 == 499:
            df._backend.flush()  # as the scheduler's flush
            print(i + 1, flush=True)
""")


@pytest.mark.parametrize("seed", range(examples(0.02)))
def test_a_killed_crawl_keeps_what_was_flushed(tmp_path, seed):
    job = str(tmp_path / "job")
    with subprocess.Popen([sys.executable, "-c", CRAWLER.format(job=job)],
                          stdout=subprocess.PIPE) as proc:
        flushed = 0
        while flushed < 3000 + 700 * seed:
            line = proc.stdout.readline()
            assert line, "the crawler stopped"
            flushed = int(line)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    _, df = make(JOBDIR=job, CRAWLDEDUP_DISK_MEMORY=1 << 20)
    assert len(df) >= flushed
    assert all(df.request_seen(Request(f"https://example.com/{i}")) for i in range(flushed))
    df.close("finished")
