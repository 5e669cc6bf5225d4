"""RecrawlState over both stores (SQLite and the real Redis): verdicts,
validators, lying hosts, bad input, scheduling."""

import math
import os
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

import crawldedup
from conftest import require_module
from crawldedup.errors import StoreUnavailableError
from crawldedup.recrawl import (
    ChangeRatePolicy,
    NutchPolicy,
    RecrawlState,
    RedisRecrawlStore,
    SQLiteRecrawlStore,
    Verdict,
)

DAY = 86400.0
T0 = 1_700_000_000.0
# The crawldedup these tests import (the source tree's or the installed wheel,
# as CI runs it), for subprocesses too.
SRC = os.path.dirname(os.path.dirname(os.path.abspath(crawldedup.__file__)))

PAGE = ("Crawlers fetch the same article from many portals. A page that differs only in a "
        "counter, an advertisement or a footer is a near duplicate, and a crawler that "
        "recognises it saves bandwidth, storage and the time of everyone who reads the index "
        "later. SimHash fingerprints make that check cheap: similar pages get fingerprints "
        "that differ in few bits. Visitors today: 1041.")


@pytest.fixture(params=["sqlite", "redis", "cluster"])
def make_state(request, tmp_path):
    """Builds RecrawlStates on a fresh store of each kind (a SQLite file,
    Redis, a Redis Cluster of three masters), cleaned up after."""
    made = []
    prefix = f"test:recrawl:{uuid.uuid4().hex}"
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
    elif request.param == "cluster":
        url = request.getfixturevalue("redis_cluster_url")

    def make(**kwargs):
        if request.param == "sqlite":
            state = RecrawlState(str(tmp_path / "recrawl.db"), **kwargs)
        else:
            state = RecrawlState(url, prefix=prefix, **kwargs)
        made.append(state)
        return state

    yield make
    if made:
        made[0].store._closed = False
        made[0].store.clear()
    for state in made:
        state.close()


def ok(url, body, headers=None, at=T0, text=None):
    return {"url": url, "status": 200, "headers": headers or {}, "body": body, "text": text,
            "time": at}


def test_verdicts(make_state):
    state = make_state()
    url = "https://news.example.com/hot"
    assert state.record(url, 200, {"ETag": '"a"'}, text=PAGE, now=T0) is Verdict.NEW
    assert state.record(url, 304, {}, now=T0 + 60) is Verdict.NOT_MODIFIED
    assert state.record(url, 200, {"ETag": '"a"'}, text=PAGE, now=T0 + 120) is Verdict.UNCHANGED
    near = PAGE.replace("bandwidth", "money")  # an edit of one word
    assert state.record(url, 200, {"ETag": '"b"'}, text=near, now=T0 + 180) \
        is Verdict.NEAR_DUPLICATE
    other = "A different story about the weather in the mountains, with rain and snow."
    assert state.record(url, 200, {"ETag": '"c"'}, text=other, now=T0 + 240) is Verdict.CHANGED
    page = state.get(url)
    assert page.fetches == 5 and page.changes == 1
    assert page.first_seen == T0 and page.last_fetched == T0 + 240
    assert page.last_changed == T0 + 240
    assert page.etag == '"c"'
    assert page.t_changed == 60 and page.t_unchanged == 180
    assert str(Verdict.CHANGED) == "changed"


def test_body_digest_and_canonical_key(make_state):
    state = make_state()
    assert state.record("https://example.com/p?b=2&a=1#top", 200, body=b"<html>x</html>",
                        now=T0) is Verdict.NEW
    assert state.record("https://example.com/p?a=1&b=2", 200, body=b"<html>x</html>",
                        now=T0 + 5) is Verdict.UNCHANGED
    assert len(state) == 1
    digest = state.get("https://example.com/p?a=1&b=2").digest
    # a crawler may pass the digest it computed (hex) instead of the body
    assert state.record("https://example.com/p?a=1&b=2", 200, digest=digest.hex(),
                        now=T0 + 9) is Verdict.UNCHANGED


def test_conditional_headers_and_head_strategy(make_state):
    state = make_state()
    lm = "Tue, 01 Dec 2026 00:00:00 GMT"
    state.record("https://a.example/1", 200, {"etag": '"x1"', "Last-Modified": lm}, body=b"one",
                 now=T0)
    state.record("https://a.example/2", 200, [(b"Content-Length", b"5")], body=b"hello", now=T0)
    # one validator: the ETag when there is one (RFC 9110 ignores the date then)
    assert state.conditional_headers("https://a.example/1") == {"If-None-Match": '"x1"'}
    state.record("https://a.example/3", 200, {"Last-Modified": lm}, body=b"three", now=T0)
    assert state.conditional_headers("https://a.example/3") == {"If-Modified-Since": lm}
    assert state.conditional_headers("https://a.example/2") == {}
    assert state.conditional_headers("https://a.example/unknown") == {}
    assert state.head_says_unchanged("https://a.example/1", {"ETag": '"x1"'})
    assert not state.head_says_unchanged("https://a.example/1", {"ETag": '"x2"',
                                                                  "Last-Modified": lm})
    assert state.head_says_unchanged("https://a.example/1", {"Last-Modified": lm})
    # no validators: the seed's Content-Length comparison
    assert state.head_says_unchanged("https://a.example/2", {"Content-Length": "5"})
    assert not state.head_says_unchanged("https://a.example/2", {"Content-Length": "6"})
    assert not state.head_says_unchanged("https://a.example/2", {})
    assert not state.head_says_unchanged("https://a.example/new", {"Content-Length": "5"})


def test_lying_last_modified_is_detected_per_host(make_state):
    state = make_state()
    liar, honest = "https://liar.example/page", "https://honest.example/page"
    for i in range(4):
        stamp = f"Tue, 01 Dec 2026 0{i}:00:00 GMT"  # moves on every fetch...
        state.record(liar, 200, {"Last-Modified": stamp}, body=b"same body", now=T0 + i * 60)
        state.record(honest, 200, {"Last-Modified": "Tue, 01 Dec 2026 00:00:00 GMT"},
                     body=b"same body", now=T0 + i * 60)
    assert state.host_stats("liar.example")["last_modified_trusted"] is False
    assert state.host_stats("liar.example")["lm_lies"] == 3
    assert state.host_stats("honest.example")["last_modified_trusted"] is True
    assert "If-Modified-Since" not in state.conditional_headers(liar)
    assert "If-Modified-Since" in state.conditional_headers(honest)
    # the liar's other pages lose it too (per host)
    state.record("https://liar.example/other", 200, {"Last-Modified": "Tue, 01 Dec 2026 "
                                                     "00:00:00 GMT"}, body=b"x", now=T0)
    assert state.conditional_headers("https://liar.example/other") == {}
    assert not state.head_says_unchanged(liar, {"Last-Modified": "Tue, 01 Dec 2026 03:00:00 GMT"})


def test_etag_that_never_changes_is_detected(make_state):
    state = make_state()
    url = "https://stuck.example/"
    for i in range(4):
        state.record(url, 200, {"ETag": '"always"'}, body=f"version {i}".encode() * 50,
                     now=T0 + i)
    stats = state.host_stats("stuck.example")
    assert stats["etag_trusted"] is False and stats["etag_lies"] == 3
    assert state.conditional_headers(url) == {}
    # with its ETag distrusted, a page of the host that has a Last-Modified
    # is asked with the date instead
    lm = "Tue, 01 Dec 2026 00:00:00 GMT"
    state.record(url + "dated", 200, {"ETag": '"always"', "Last-Modified": lm}, body=b"x",
                 now=T0)
    assert state.conditional_headers(url + "dated") == {"If-Modified-Since": lm}


def test_bad_input(make_state):
    state = make_state()
    url = "https://bad.example/"
    with pytest.raises(ValueError, match="status is missing"):
        state.record(url, None, body=b"x")
    with pytest.raises(ValueError, match="2xx or 304"):
        state.record(url, 404, body=b"x")
    with pytest.raises(TypeError, match="status must be an int"):
        state.record(url, "200", body=b"x")
    with pytest.raises(ValueError, match="non-ASCII"):
        state.record(url, 200, {b"ETag": b"\xff\xfe"}, body=b"x")
    with pytest.raises(ValueError, match="non-ASCII"):
        state.record(url, 200, {"ETag": "caf\u00e9"}, body=b"x")
    with pytest.raises(ValueError, match="no version"):
        state.record(url, 304, {})
    with pytest.raises(ValueError, match="needs body, text or digest"):
        state.record(url, 200, {})
    with pytest.raises(TypeError, match="body must be bytes"):
        state.record(url, 200, body="text")
    with pytest.raises(ValueError, match="16 bytes"):
        state.record(url, 200, digest="abcd")
    with pytest.raises(ValueError, match="url is empty"):
        state.record("  ", 200, body=b"x")
    with pytest.raises(TypeError, match="headers"):
        state.record(url, 200, 42, body=b"x")
    with pytest.raises(ValueError, match="time must be"):
        state.record(url, 200, body=b"x", now=float("nan"))
    assert len(state) == 0
    # a batch with one bad fetch records none of them
    with pytest.raises(ValueError, match=r"fetches\[2\]"):
        state.record_many([ok("https://bad.example/1", b"a"), ok("https://bad.example/2", b"b"),
                           {"url": "https://bad.example/3", "status": 200,
                            "headers": {"Last-Modified": b"\x80"}, "body": b"c"}])
    assert len(state) == 0
    # an unparseable date is counted, never fatal
    assert state.record(url, 200, {"Last-Modified": "last tuesday", "Content-Length": "many"},
                        body=b"x", now=T0) is Verdict.NEW
    assert state.stats["bad_dates"] == 1 and state.stats["bad_lengths"] == 1
    assert state.host_stats("bad.example")["bad_dates"] == 1
    assert state.get(url).last_modified is None
    with pytest.raises(ValueError, match="limit"):
        state.due(T0, -1)
    with pytest.raises(ValueError, match="per_host"):
        state.due(T0, 5, per_host=0)


def test_host_pooling_gives_new_pages_their_site_rate(make_state):
    state = make_state()
    fetches = []
    for page in range(10):  # pages of a fast site change at every hourly fetch
        for hour in range(6):
            fetches.append(ok(f"https://fast.example/{page}", f"v{hour}".encode(),
                              at=T0 + hour * 3600))
    state.record_many(fetches)
    state.record("https://fast.example/new", 200, body=b"n", now=T0 + 7 * 3600)
    state.record("https://unknown.example/new", 200, body=b"n", now=T0 + 7 * 3600)
    fast = state.get("https://fast.example/new").rate
    unknown = state.get("https://unknown.example/new").rate
    assert unknown == pytest.approx(ChangeRatePolicy().prior_rate)
    assert fast > 20 * unknown
    assert state.host_stats("fast.example")["rate"] == pytest.approx(fast)


def test_due_ranks_by_freshness_gain_and_caps_hosts(make_state):
    state = make_state(policy=ChangeRatePolicy(prior_weight=0.5, min_interval=1.0))
    batch = []
    for i in range(30):  # every minute: cannot be kept fresh with hourly fetches
        batch.append(ok("https://minute.example/p", f"{i}".encode(), at=T0 + i * 60))
    for day in range(30):  # daily
        batch.append(ok("https://daily.example/p", f"{day}".encode(), at=T0 - 30 * DAY
                        + day * DAY))
    for day in range(0, 30, 3):  # never changes
        batch.append(ok("https://static.example/p", b"same", at=T0 - 30 * DAY + day * DAY))
    for i in range(5):
        batch.append(ok(f"https://many.example/{i}", b"x", at=T0 - 2 * DAY))
    state.record_many(batch)
    minute = state.get("https://minute.example/p").rate
    daily = state.get("https://daily.example/p").rate
    assert minute > 100 * daily
    later = T0 + 60 * DAY
    order = state.due(later, 100)
    assert order.index("https://daily.example/p") < order.index("https://minute.example/p")
    capped = state.due(later, 100, per_host=2)
    assert sum(u.startswith("https://many.example/") for u in capped) == 2
    assert len(state.due(later, 3)) == 3
    # a lease hides the URLs handed out until it ends
    leased = state.due(later, 2, lease=3600)
    assert not set(leased) & set(state.due(later, 100))
    assert set(leased) <= set(state.due(later + 7200, 100))


def test_nutch_policy_intervals(make_state):
    policy = NutchPolicy(default_interval=1000.0, min_interval=100.0, max_interval=2000.0,
                         sync_delta=False)
    state = make_state(policy=policy)
    url = "https://n.example/"
    state.record(url, 200, body=b"a", now=T0)
    assert state.get(url).interval == 1000.0 and state.get(url).due_at == T0 + 1000
    state.record(url, 200, body=b"a", now=T0 + 1000)
    assert state.get(url).interval == pytest.approx(1400.0)
    state.record(url, 200, body=b"b", now=T0 + 2400)
    assert state.get(url).interval == pytest.approx(1120.0)
    for i in range(5):
        state.record(url, 200, body=b"b", now=T0 + 5000 + i)
    assert state.get(url).interval == 2000.0  # clamped
    for i in range(20):
        state.record(url, 200, body=f"{i}".encode(), now=T0 + 9000 + i)
    assert state.get(url).interval == 100.0
    assert state.due(T0 + 9019 + 100, 10) == [url]
    assert state.due(T0 + 9019 + 99, 10) == []


def test_nutch_defaults():
    policy = NutchPolicy()
    assert (policy.default_interval, policy.inc_rate, policy.dec_rate, policy.min_interval,
            policy.max_interval, policy.sync_delta, policy.sync_delta_rate) == (
        30 * DAY, 0.4, 0.2, 60.0, 365 * DAY, True, 0.3)
    # sync delta: a changed page modified 1000 s before the fetch
    interval, due = policy.next(5000.0, True, 10_000.0, modified_at=9000.0)
    assert interval == 1000.0 and due == 10_000.0 - 300.0 + 1000.0
    with pytest.raises(ValueError, match="min_interval"):
        NutchPolicy(min_interval=10.0, max_interval=5.0)
    with pytest.raises(ValueError, match="inc_rate"):
        NutchPolicy(inc_rate=1.5)


def test_budget_sets_the_fetch_frequencies(make_state):
    """The multiplier solved for a budget of 100 fetches a day gives pages
    intervals whose fetch frequencies add up to that budget."""
    state = make_state(policy=ChangeRatePolicy(budget_per_day=100.0, prior_rate=1.0 / DAY))
    urls = [f"https://s{i % 7}.example/{i}" for i in range(200)]
    state.record_many([ok(url, b"x", at=T0) for url in urls])
    state.due(T0, 1)  # solves the multiplier for the budget
    state.record_many([ok(url, b"x", at=T0 + 1) for url in urls])
    per_day = sum(DAY / state.get(url).interval for url in urls)
    assert per_day == pytest.approx(100.0, rel=0.15)


def test_record_many_equals_one_by_one(make_state, tmp_path):
    state = make_state()
    fetches = []
    for i in range(40):
        url = f"https://h{i % 11 % 3}.example/{i % 11}"
        body = f"body {i % 4}".encode()
        status = 304 if i >= 11 and i % 5 == 0 else 200
        fetches.append({"url": url, "status": status, "headers": {"ETag": f'"{i % 4}"'},
                        "body": None if status == 304 else body, "time": T0 + i * 100})
    batch_verdicts = state.record_many(fetches)
    other = RecrawlState(str(tmp_path / "one.db"))
    single = [other.record(f["url"], f["status"], f["headers"], f["body"], now=f["time"])
              for f in fetches]
    assert batch_verdicts == single
    for i in range(11):
        url = f"https://h{i % 3}.example/{i}"
        # all but the rate and schedule, which the batch computes with its
        # hosts' pooled rates at its end
        assert state.get(url)[:14] == other.get(url)[:14]
    other.close()


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2), st.booleans()),
                min_size=1, max_size=30))
def test_counts_match_a_model(tmp_path_factory, events):
    """Fetch and change counts and verdicts agree with a dict model."""
    path = tmp_path_factory.mktemp("h") / "s.db"
    state = RecrawlState(str(path))
    model = {}
    for step, (page, version, as_304) in enumerate(events):
        url = f"https://m.example/{page}"
        known = url in model
        if known and as_304:
            verdict = state.record(url, 304, now=T0 + step)
            assert verdict is Verdict.NOT_MODIFIED
            model[url][1] += 1
            continue
        verdict = state.record(url, 200, body=f"v{version}".encode() * 40, now=T0 + step)
        if not known:
            assert verdict is Verdict.NEW
            model[url] = [version, 1, 0]
        else:
            expected = Verdict.UNCHANGED if model[url][0] == version else Verdict.CHANGED
            assert verdict in ((expected,) if expected is Verdict.UNCHANGED
                               else (Verdict.CHANGED, Verdict.NEAR_DUPLICATE))
            model[url][1] += 1
            if verdict is Verdict.CHANGED:
                model[url][2] += 1
            model[url][0] = version
        page_state = state.get(url)
        assert (page_state.fetches, page_state.changes) == tuple(model[url][1:])
    assert len(state) == len(model)
    state.close()


def test_redis_unreachable_names_the_address():
    require_module("redis")
    with pytest.raises(StoreUnavailableError, match="127.0.0.1:1"):
        RedisRecrawlStore("redis://127.0.0.1:1/0")


def test_on_a_redis_cluster_the_state_keeps_to_one_slot(redis_cluster_url):
    """Every key of a state on a Redis Cluster has its prefix as hash tag, so
    record_many stays one MULTI/EXEC; a plain client to a node is refused."""
    import redis
    prefix = f"test:recrawl:{uuid.uuid4().hex}"
    state = RecrawlState(redis_cluster_url, prefix=prefix)
    client = redis.cluster.RedisCluster.from_url(redis_cluster_url)
    try:
        assert state.store.cluster
        state.record_many([{"url": f"https://h{i % 7}.example/{i}", "status": 200,
                            "body": b"v1", "time": T0} for i in range(40)])
        state.record_many([{"url": f"https://h{i % 7}.example/{i}", "status": 200,
                            "body": b"v2", "time": T0 + DAY} for i in range(40)])
        assert len(state.due(T0 + 400 * DAY, 100)) == 40
        keys = list(client.scan_iter(match="{" + prefix + "}:*"))
        # 40 pages, 7 hosts, the due set, the histogram, the settings
        assert len(keys) == 40 + 7 + 3
        assert {client.keyslot(key) for key in keys} == {client.keyslot(prefix)}
        with pytest.raises(ValueError, match="braces"):
            RedisRecrawlStore(redis_cluster_url, prefix="a{b}")
        node = redis.Redis.from_url(redis_cluster_url)
        with pytest.raises(ValueError, match="Redis Cluster"):
            RedisRecrawlStore(node, prefix=prefix)
        node.close()
    finally:
        state.store.clear()
        state.close()
        client.close()


def test_sqlite_unusable_path_names_the_file(tmp_path):
    bad = tmp_path / "no" / "such" / "dir" / "r.db"
    with pytest.raises(StoreUnavailableError, match="r.db"):
        SQLiteRecrawlStore(str(bad))
    with pytest.raises(TypeError, match="store must be"):
        RecrawlState(42)
    with pytest.raises(TypeError, match="policy"):
        RecrawlState(str(tmp_path / "x.db"), policy="nutch")


def test_survives_kill_9(tmp_path):
    """Every fetch whose verdict a crawler printed is still there after kill -9."""
    path = str(tmp_path / "killed.db")
    child = textwrap.dedent(f"""
        import sys
        from crawldedup.recrawl import RecrawlState
        state = RecrawlState({path!r})
        i = 0
        while True:
            verdict = state.record(f"https://k.example/{{i}}", 200, body=b"page %d" % i,
                                   now=1.7e9 + i)
            print(i, verdict.value, flush=True)
            i += 1
    """)
    env = dict(os.environ, PYTHONPATH=SRC)
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, env=env)
    printed = []
    try:
        for line in proc.stdout:
            printed.append(int(line.split()[0]))
            if len(printed) >= 300:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    state = RecrawlState(path)
    assert len(state) >= len(printed)
    for i in printed:
        page = state.get(f"https://k.example/{i}")
        assert page is not None and page.fetches == 1
    state.close()


def test_rates_stay_finite(make_state):
    state = make_state()
    state.record("https://z.example/", 200, body=b"a", now=T0)
    state.record("https://z.example/", 200, body=b"b", now=T0)  # zero interval
    state.record("https://z.example/", 200, body=b"c", now=T0 - 10)  # clock went back
    page = state.get("https://z.example/")
    assert math.isfinite(page.rate) and page.rate > 0 and math.isfinite(page.due_at)
    assert page.fetches == 3 and page.last_fetched == T0
