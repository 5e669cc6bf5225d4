"""State written by crawldedup 0.1.0 (commit e89a6a3) loads with this crawldedup.

tests/fixtures/legacy/ holds files, pickles, Scrapy JOBDIRs, SQLite files,
command-line states and Redis keys that the 0.1.0 release wrote, and
expected.json, what that release said about each (sizes, parameters, the
answers it gave).  Each test opens a copy (mapped opens and stores write)
and checks the contents against those answers: a module moved without
keeping the names that pickles, files and stores refer to shows up here.
The fixtures are regenerated only with 0.1.0's code (see their README.md).
"""

import base64
import hashlib
import json
import os
import pathlib
import pickle
import shutil
import struct
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

from conftest import require_module
from crawldedup import (
    BloomFilter,
    CrawldedupError,
    FingerprintSet,
    RotatingBloomFilter,
    ScalableBloomFilter,
    SimhashIndex,
    SQLiteStore,
)

LEGACY = pathlib.Path(__file__).resolve().parent / "fixtures" / "legacy"
EXPECTED = json.loads((LEGACY / "expected.json").read_text())
OBJECTS = EXPECTED["objects"]
FILES = EXPECTED["files"]
PICKLES = EXPECTED["pickles"]
#: The Bloom file header's flags word (docs/format.md) and its DIRTY bit.
FLAGS_AT, FLAG_DIRTY = 20, 1


# ---- the content the fixtures hold (as make_fixtures.py made it)

def key(i):
    return f"url-{i}"


def keys(n, start=0):
    return [key(i) for i in range(start, n)]


ABSENT = [f"absent-{i}" for i in range(2000)]


def md5(text):
    return hashlib.md5(text.encode()).digest()


def sha1(text):
    return hashlib.sha1(text.encode()).digest()


DIGESTS = {"md5": md5, "sha1": sha1}


def indices(flags):
    return np.flatnonzero(np.asarray(flags)).tolist()


def runs(flags):
    """The True positions of flags as [start, stop) runs."""
    out = []
    for i in indices(flags):
        if out and out[-1][1] == i:
            out[-1][1] = i + 1
        else:
            out.append([i, i + 1])
    return out


def decode_id(tagged):
    tag, value = tagged
    return bytes.fromhex(value) if tag == "b" else value


class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


def copy(tmp_path, name):
    """A copy of the fixture file or folder `name` in tmp_path."""
    source = LEGACY / name
    target = tmp_path / source.name
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copyfile(source, target)
    return target


# ---- checks of each kind of object against what 0.1.0 said about it

def check_bloom(bf, facts):
    params = ("capacity", "error_rate", "seed", "layout", "num_bits", "num_hashes",
              "insert_count")
    assert {p: getattr(bf, p) for p in params} == {p: facts[p] for p in params}
    assert bf.estimated_count() == facts["estimated_count"]
    assert bf.contains_many(keys(facts["keys"])).all()
    assert all(key(i) in bf for i in (0, facts["keys"] - 1))
    # The same false positives: the same bits, hashed the same way.
    assert indices(bf.contains_many(ABSENT)) == facts["absent_found"]
    assert len(facts["absent_found"]) < 0.03 * len(ABSENT)


def check_scalable(sbf, facts):
    params = ("initial_capacity", "error_rate", "growth", "tightening", "seed", "num_filters",
              "capacity", "insert_count")
    assert {p: getattr(sbf, p) for p in params} == {p: facts[p] for p in params}
    assert [[f.capacity, f.error_rate, f.num_bits, f.num_hashes, f.insert_count]
            for f in sbf.filters] == facts["members"]
    assert sbf.contains_many(keys(facts["keys"])).all()
    assert indices(sbf.contains_many(ABSENT)) == facts["absent_found"]
    assert len(facts["absent_found"]) < 0.03 * len(ABSENT)


def check_rotating(rf, facts):
    rf.rotate_if_due()
    # Which keys are remembered: the generations and the rotations restored.
    assert runs(rf.contains_many(keys(facts["keys"]))) == facts["found"]
    params = ("capacity", "error_rate", "generations", "rotate_every", "rotate_at_fill", "seed",
              "layout", "rotations", "next_rotation", "insert_count")
    assert {p: getattr(rf, p) for p in params} == {p: facts[p] for p in params}
    assert [f.insert_count for f in rf.filters] == facts["member_counts"]
    assert [rf.filters[0].num_bits, rf.filters[0].num_hashes] == facts["member_bits"]
    assert indices(rf.contains_many(ABSENT)) == facts["absent_found"]


def check_fpset(fps, facts):
    digest = DIGESTS[facts["digest"]]
    assert (fps.digest_size, len(fps)) == (facts["digest_size"], facts["len"])
    wanted = [digest(t) for t in keys(facts["keys"])]
    assert fps.contains_many(wanted).all()
    assert sorted(fps) == sorted(wanted)
    assert facts["absent_found"] == []
    assert not fps.contains_many([digest(t) for t in ABSENT]).any()


def check_index(index, facts):
    assert (index.k, len(index)) == (facts["k"], facts["len"])
    for tagged, _fp in facts["ids"]:
        assert decode_id(tagged) in index
    for fp, found in facts["queries"]:
        assert index.query(fp) == [(decode_id(i), d) for i, d in found]
    assert list(index.pairs()) == [(decode_id(a), decode_id(b), d)
                                   for a, b, d in facts["pairs"]]


CHECKS = {"BloomFilter": check_bloom, "ScalableBloomFilter": check_scalable,
          "RotatingBloomFilter": check_rotating, "FingerprintSet": check_fpset,
          "SimhashIndex": check_index}
CLASSES = {"BloomFilter": BloomFilter, "ScalableBloomFilter": ScalableBloomFilter,
           "RotatingBloomFilter": RotatingBloomFilter, "FingerprintSet": FingerprintSet,
           "SimhashIndex": SimhashIndex}


def check_object(obj, facts):
    assert type(obj) is CLASSES[facts["class"]]
    CHECKS[facts["class"]](obj, facts)


# ---- the fixtures themselves

def test_the_fixtures_are_the_files_crawldedup_0_1_0_wrote():
    assert (EXPECTED["crawldedup_version"], EXPECTED["commit"]) == ("0.1.0", "e89a6a3")
    found = {p.relative_to(LEGACY).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in LEGACY.rglob("*") if p.is_file()
             and p.name not in ("expected.json", "README.md", "make_fixtures.py")
             and "__pycache__" not in p.parts}
    assert found == EXPECTED["sha256"]
    total = sum(p.stat().st_size for p in LEGACY.rglob("*") if p.is_file())
    assert total < 2 << 20


# ---- saved and mapped files

SAVED = sorted(name for name, facts in FILES.items() if "object" in facts)


@pytest.mark.parametrize("name", SAVED)
def test_a_file_saved_by_0_1_0_loads_with_its_contents(tmp_path, name):
    facts = OBJECTS[FILES[name]["object"]]
    path = copy(tmp_path, f"files/{name}")
    check_object(CLASSES[facts["class"]].load(path), facts)
    # from_bytes reads the same format (pickles carry it).
    check_object(CLASSES[facts["class"]].from_bytes(path.read_bytes()), facts)


@pytest.mark.parametrize("name", ["bloom-mapped-w.bloom", "bloom-mapped-c.bloom"])
def test_a_mapped_bloom_file_of_0_1_0_opens_in_place(tmp_path, name):
    facts = FILES[name]
    path = copy(tmp_path, f"files/{name}")
    assert (LEGACY / "files" / name).read_bytes()[FLAGS_AT] & FLAG_DIRTY == 0
    with BloomFilter.open(path, mode="r") as bf:
        check_bloom(bf, facts)
    check_bloom(BloomFilter.load(path), facts)
    # Opened for writing with its own parameters, it takes new keys in place.
    with BloomFilter.open(path, facts["capacity"], facts["error_rate"], seed=facts["seed"],
                          layout=facts["layout"]) as bf:
        assert bf.add("a key 0.1.0 never saw") is True
        assert bf.add(key(0)) is False
    again = BloomFilter.load(path)
    assert again.insert_count == facts["insert_count"] + 1
    assert "a key 0.1.0 never saw" in again and again.contains_many(keys(facts["keys"])).all()


def test_a_bloom_file_a_killed_writer_of_0_1_0_left_dirty_loads_and_is_repaired(tmp_path):
    facts = FILES["bloom-mapped-killed.bloom"]
    path = copy(tmp_path, "files/bloom-mapped-killed.bloom")
    assert path.read_bytes()[FLAGS_AT] & FLAG_DIRTY
    check_bloom(BloomFilter.load(path), facts)
    # A writer that has it alone seals it: checksum recomputed, flag cleared.
    with BloomFilter.open(path, mode="c") as bf:
        check_bloom(bf, facts)
    assert path.read_bytes()[FLAGS_AT] & FLAG_DIRTY == 0
    check_bloom(BloomFilter.load(path), facts)


def test_the_fixture_header_flags_word_is_where_the_format_says():
    # FLAGS_AT above reads the header's flags word: magic (8 bytes), then
    # version, kind, hash algorithm, layout (u16 each), header size (u32).
    data = (LEGACY / "files" / "bloom-standard.bloom").read_bytes()
    magic, version, kind = struct.unpack_from("<8sHH", data, 0)
    assert (magic, version, kind) == (b"\x89CRDDUP\n", 1, 1)
    assert struct.unpack_from("<I", data, FLAGS_AT)[0] == 0


@pytest.mark.parametrize("name", ["rotating-timed.rbf", "rotating-mapped.rbf"])
def test_a_rotating_file_of_0_1_0_keeps_its_rotation_schedule(tmp_path, name):
    # facts["at"]: the filter at the time it was saved, then after a
    # further timed rotation (which forgets the oldest generation's keys).
    now, later = FILES[name]["at"]
    path = copy(tmp_path, f"files/{name}")
    for at in (now, later):
        check_rotating(RotatingBloomFilter.load(path, clock=Clock(at["clock"])), at)
    assert now["rotations"] < later["rotations"]
    assert now["found"] == [[0, 1000]]
    # The oldest generation's keys are gone but for a few false positives.
    oldest = 400 if name == "rotating-timed.rbf" else 500
    assert sum(min(stop, oldest) - start for start, stop in later["found"]
               if start < oldest) < 0.05 * oldest


def test_a_mapped_rotating_file_of_0_1_0_rotates_in_place(tmp_path):
    now, later = FILES["rotating-mapped.rbf"]["at"]
    path = copy(tmp_path, "files/rotating-mapped.rbf")
    with RotatingBloomFilter.open(path, mode="r", clock=Clock(now["clock"])) as rf:
        check_rotating(rf, now)
    # A writer, once the next rotation is due, rotates the file itself.
    with RotatingBloomFilter.open(path, mode="c", clock=Clock(later["clock"])) as rf:
        check_rotating(rf, later)
    with RotatingBloomFilter.open(path, mode="r", clock=Clock(later["clock"])) as rf:
        check_rotating(rf, later)


# ---- pickles

OBJECT_PICKLES = sorted(name for name, facts in PICKLES.items() if facts["object"] in OBJECTS)


@pytest.mark.parametrize("name", OBJECT_PICKLES)
def test_a_pickle_of_0_1_0_unpickles_with_its_contents(name):
    facts = PICKLES[name]
    obj = pickle.loads((LEGACY / "pickles" / name).read_bytes())
    check_object(obj, OBJECTS[facts["object"]])
    # It pickles again, to the same state.
    assert pickle.loads(pickle.dumps(obj)).to_bytes() == obj.to_bytes()


def test_every_public_class_that_pickled_in_0_1_0_has_fixtures():
    names = {facts["object"] for facts in PICKLES.values()}
    assert names >= {"bloom-standard", "bloom-blocked", "scalable", "rotating-fill", "fpset-md5",
                     "simhash-int", "simhash-mixed", "compat-simhash", "compat-simhashindex",
                     "verdict", "page-links", "change-rate-policy", "nutch-policy",
                     "canonical-url", "url-rules", "errors"}
    crafted = {facts["globals"][0] for facts in PICKLES.values() if facts.get("crafted")}
    assert crafted == {"crawldedup.fpset _restore", "crawldedup.bloom _restore",
                       "crawldedup.scalable _restore", "crawldedup.rotating _restore"}


def pickles_of(name):
    return [pickle.loads((LEGACY / "pickles" / p).read_bytes())
            for p, facts in sorted(PICKLES.items()) if facts["object"] == name]


def test_pickles_of_0_1_0_compat_simhash_values_unpickle():
    from crawldedup.compat.simhash import Simhash
    facts = EXPECTED["compat"]
    for value in pickles_of("compat-simhash"):
        assert type(value) is Simhash
        assert (value.value, value.f) == (facts["values"][0], 64)
        assert value.distance(Simhash(facts["texts"][0])) == 0
        assert value.distance(Simhash(facts["texts"][1])) > 0


def test_pickles_of_0_1_0_compat_simhash_index_unpickle():
    from crawldedup.compat.simhash import Simhash
    from crawldedup.compat.simhash import SimhashIndex as CompatIndex
    facts = EXPECTED["compat"]
    for index in pickles_of("compat-simhashindex"):
        assert type(index) is CompatIndex
        assert index.bucket_size() == facts["bucket_size"]
        for text, near in zip(facts["texts"], facts["near_dups"]):
            assert sorted(index.get_near_dups(Simhash(text))) == near
        index.add("new", Simhash("an entirely different document about something else"))
        assert index.get_near_dups(Simhash("an entirely different document about "
                                           "something else")) == ["new"]


def test_pickles_of_0_1_0_values_unpickle():
    from crawldedup import CanonicalUrl, IncompatibleFilterError, StoreUnavailableError
    from crawldedup.recrawl import ChangeRatePolicy, NutchPolicy, PageLinks, Verdict
    facts = EXPECTED["values"]

    def each(name):
        values = pickles_of(name)
        assert len(values) == 2  # protocol 2 and the default one
        return values

    for verdict in each("verdict"):
        assert verdict is Verdict.CHANGED and verdict.value == facts["verdict"]
    links = facts["page-links"]
    for value in each("page-links"):
        assert type(value) is PageLinks
        assert value == PageLinks(bytes.fromhex(links["digest"]), links["links"],
                                  links["body"].encode(), links["headers"])
    for name, cls in (("change-rate-policy", ChangeRatePolicy), ("nutch-policy", NutchPolicy)):
        for policy in each(name):
            assert type(policy) is cls and vars(policy) == facts[name]
    for value in each("canonical-url"):
        assert type(value) is CanonicalUrl and list(value) == facts["canonical-url"]
    rules = facts["url-rules"]
    for value in each("url-rules"):
        assert [[r.host, r.pattern, r.replacement, r.url_class] for r in value] == rules["rules"]
        assert list(value.resolve("http://item.example/42.html?utm_source=x")) \
            == rules["resolved"]
        assert value.classify("https://shop.example/list?page=2") == rules["classified"]
    for errors in each("errors"):
        assert [[type(e).__name__, str(e)] for e in errors] == facts["errors"]
        assert all(isinstance(e, CrawldedupError) for e in errors)
        assert isinstance(errors[1], IncompatibleFilterError)
        assert isinstance(errors[2], StoreUnavailableError)


# ---- Scrapy JOBDIRs

def scrapy_filter(jobdir, backend):
    """The filter a crawl with these settings and JOBDIR builds, made with
    its own constructor (no crawler: a crawler needs an installed reactor
    in some Scrapy versions)."""
    from scrapy.settings import Settings

    from crawldedup.scrapy import DupeFilter
    settings = Settings({"CRAWLDEDUP_DUPEFILTER": backend, "CRAWLDEDUP_CAPACITY": 1000,
                         "CRAWLDEDUP_ERROR_RATE": 0.0001, "JOBDIR": str(jobdir)})
    df = DupeFilter(backend, jobdir=str(jobdir), settings=settings)
    # A state the filter refuses gives back a filter that stops the crawl.
    assert df.backend == backend, getattr(df, "_error", None)
    return df


def seen(df, specs):
    from scrapy import Request
    return [df.request_seen(Request(url, method=method, body=body.encode()))
            for url, method, body in specs]


@pytest.mark.parametrize("name", ["jobdir-exact", "jobdir-bloom", "jobdir-exact-killed"])
def test_a_scrapy_jobdir_of_0_1_0_resumes_the_crawl(tmp_path, name):
    require_module("scrapy")
    facts = EXPECTED["scrapy"][name]
    requests = EXPECTED["scrapy"]["requests"]
    jobdir = copy(tmp_path, f"scrapy/{name}")
    df = scrapy_filter(jobdir, facts["backend"])
    assert len(df) == facts["len"] == 50
    assert seen(df, requests["seen"]) == facts["seen"] == [True] * len(requests["seen"])
    assert seen(df, requests["new"]) == facts["new"]
    assert not any(facts["new"])
    df.close("finished")
    # The resumed crawl's state holds the requests it added.
    df = scrapy_filter(jobdir, facts["backend"])
    assert len(df) == 50 + len(requests["new"])
    assert all(seen(df, requests["new"]))
    df.close("finished")
    assert not (jobdir / "crawldedup-seen.fps.log").exists()


# ---- SQLite files

def test_a_sqlitestore_file_of_0_1_0_holds_its_fingerprints_and_receipt(tmp_path):
    facts = EXPECTED["sqlite"]["store.db"]
    path = copy(tmp_path, "sqlite/store.db")
    with SQLiteStore(path) as store:
        assert len(store) == facts["len"] == facts["keys"]
        assert store.contains_many([md5(t) for t in keys(facts["keys"])]).all()
        assert indices(store.contains_many([md5(t) for t in ABSENT])) == facts["absent_found"]
        # The receipt gives back the answer recorded in 0.1.0 (every digest
        # is in the store now, so adding them again would answer all False).
        start, stop = facts["receipt_batch"]
        batch = [md5(t) for t in keys(stop, start)]
        assert indices(store.add_many_once(batch, facts["receipt"].encode())) \
            == facts["receipt_flags"] != []
        assert not store.add_many_once(batch, b"another receipt").any()
        assert len(store) == facts["len"]
    sha1s = facts["sha1s"]
    with SQLiteStore(path, table=sha1s["table"], digest_size=20) as store:
        assert len(store) == sha1s["len"]
        assert store.contains_many([sha1(t) for t in keys(sha1s["keys"])]).all()
        assert store.add(sha1("new")) is True


def page_facts(page):
    values = page._asdict()
    values["digest"] = None if page.digest is None else page.digest.hex()
    return values


def check_recrawl(state, facts):
    """What the state of 0.1.0 holds, and its verdicts on further fetches."""
    from crawldedup.recrawl import PageLinks, Verdict
    t0 = EXPECTED["t0"]
    assert len(state) == facts["len"]
    for url, page in facts["pages"].items():
        assert page_facts(state.get(url)) == page
        assert state.conditional_headers(url) == facts["conditional"][url]
    links = facts["links"]
    assert state.get_links(links["url"]) == PageLinks(
        bytes.fromhex(facts["links_digest"]), links["links"], links["body"].encode(),
        links["headers"])
    assert sorted(state.due(now=t0 + 10 ** 9, limit=100)) == sorted(
        {page["url"] for page in facts["pages"].values()})
    later = t0 + 4 * 86400
    assert state.record("https://example.com/a", 304, {}, now=later) is Verdict.NOT_MODIFIED
    assert state.record("https://other.example/c", 200, {}, body=b"version two of c",
                        now=later) is Verdict.UNCHANGED
    assert state.record("https://example.com/b?y=2&x=1", 200, {}, body=b"something else",
                        now=later) is Verdict.CHANGED
    assert state.record("https://example.com/new", 200, {}, body=b"new", now=later) \
        is Verdict.NEW
    assert len(state) == facts["len"] + 1
    page = state.get("https://example.com/a")
    assert page.fetches == facts["pages"]["https://example.com/a"]["fetches"] + 1


def test_a_recrawl_state_of_0_1_0_on_sqlite_resumes(tmp_path):
    from crawldedup.recrawl import RecrawlState, SQLiteRecrawlStore
    facts = EXPECTED["sqlite"]["recrawl.db"]
    assert facts["verdicts"] == ["new", "new", "new", "new", "not_modified", "unchanged",
                                 "changed", "near_duplicate"]
    path = copy(tmp_path, "sqlite/recrawl.db")
    with RecrawlState(SQLiteRecrawlStore(os.fspath(path))) as state:
        check_recrawl(state, facts)
    with RecrawlState(os.fspath(path)) as state:  # a path opens the same store
        assert len(state) == facts["len"] + 1


# ---- the command line's states

CLI = EXPECTED["cli"]


def crawldedup_urls(args, folder, *files):
    run = subprocess.run([sys.executable, "-m", "crawldedup", "urls",
                          *[a.format(dir=folder) for a in args], *map(str, files)],
                         capture_output=True, timeout=120)
    return run.returncode, run.stdout.decode().splitlines(), run.stderr.decode()


@pytest.mark.parametrize("name", sorted(CLI))
def test_a_command_line_state_of_0_1_0_goes_on_deduplicating(tmp_path, name):
    facts = CLI[name]
    folder = copy(tmp_path, f"cli/{name}")
    assert sorted(p.name for p in folder.iterdir()) == facts["files"]
    code, printed, err = crawldedup_urls(facts["args"], folder, LEGACY / "cli" / "input.txt")
    assert (code, printed) == (0, []), err
    assert "new 0," in err
    code, printed, err = crawldedup_urls(facts["args"], folder, LEGACY / "cli" / "new.txt")
    assert code == 0, err
    assert printed == facts["new_run"] and len(printed) >= 22
    code, printed, err = crawldedup_urls(facts["args"], folder, LEGACY / "cli" / "new.txt")
    assert (code, printed) == (0, []), err


def test_the_key_mode_recorded_by_0_1_0_still_refuses_another_mode(tmp_path):
    folder = copy(tmp_path, "cli/exact")
    code, printed, err = crawldedup_urls(["--exact", "--state", "{dir}/seen.fps"], folder,
                                         LEGACY / "cli" / "input.txt")
    assert code == CLI["exact"]["other_mode_exit"] != 0
    assert printed == [] and "--canonical" in err


# ---- Redis keys

REDIS = json.loads((LEGACY / "redis.json").read_text())
REDIS_FACTS = EXPECTED["redis"]


@pytest.fixture
def legacy_redis(redis_url):
    """The Redis keys of 0.1.0 restored under a fresh prefix: (url, rename,
    client), rename turning a fixture's key name into the restored one."""
    redis = require_module("redis")
    token = f"cdlegacy-{uuid.uuid4().hex[:12]}"
    placeholder = REDIS["name_placeholder"]
    client = redis.Redis.from_url(redis_url)

    def delete_ours():
        stale = list(client.scan_iter(match=f"*{token}*", count=1000))
        if stale:
            client.delete(*stale)

    def raw(text):
        return base64.b64decode(text)

    try:
        delete_ours()
        pipe = client.pipeline(transaction=False)
        for name, entry in REDIS["keys"].items():
            target = name.replace(placeholder, token)
            kind, value = entry["type"], entry["value"]
            if kind == "string":
                data = raw(value)
                if entry.get("holds_name"):  # the metadata's list of key names
                    data = data.replace(placeholder.encode(), token.encode())
                pipe.set(target, data)
            elif kind == "hash":
                pipe.hset(target, mapping={raw(f): raw(v) for f, v in value.items()})
            elif kind == "set":
                pipe.sadd(target, *[raw(m) for m in value])
            elif kind == "zset":
                pipe.zadd(target, {raw(m): score for m, score in value})
            elif kind == "list":
                pipe.rpush(target, *[raw(m) for m in value])
            else:
                raise AssertionError(f"{name}: unknown type {kind}")
            if "expire_at_ms" in entry:
                pipe.pexpireat(target, entry["expire_at_ms"])
        pipe.execute()
        yield redis_url, lambda name: name.replace(placeholder, token), client
    finally:
        delete_ours()
        client.close()


def test_the_redis_fixture_names_every_key_relative_to_its_prefix():
    placeholder = REDIS["name_placeholder"]
    assert all(name.startswith((placeholder, "{" + placeholder)) for name in REDIS["keys"])
    kinds = {entry["type"] for entry in REDIS["keys"].values()}
    assert kinds == {"string", "hash", "set", "zset"}


@pytest.mark.parametrize("label", ["bloom", "bloom-std"])
def test_a_redis_bloom_filter_of_0_1_0_opens_with_its_keys(legacy_redis, label):
    from crawldedup.redis import RedisBloomFilter
    url, rename, _ = legacy_redis
    facts = REDIS_FACTS[label]
    with RedisBloomFilter(url, rename(facts["name"])) as rbf:
        params = ("capacity", "error_rate", "layout", "shards", "num_bits", "num_hashes", "seed")
        assert {p: getattr(rbf, p) for p in params} == {p: facts[p] for p in params}
        assert rbf.estimated_count() == facts["estimated_count"]
        assert rbf.contains_many(keys(facts["keys"])).all()
        assert indices(rbf.contains_many(ABSENT)) == facts["absent_found"]
        local = rbf.to_bloom_filter()
        assert local.contains_many(keys(facts["keys"])).all()
        if "receipt" in facts:
            start, stop = facts["receipt_batch"]
            assert indices(rbf.add_many_once(keys(stop, start), facts["receipt"].encode())) \
                == facts["receipt_flags"] != []
        assert rbf.add("a key 0.1.0 never saw") is True


@pytest.mark.parametrize("label", ["store", "store-tagged"])
def test_a_redis_store_of_0_1_0_holds_its_fingerprints_and_receipt(legacy_redis, label):
    from crawldedup.redis import RedisStore
    url, rename, _ = legacy_redis
    facts = REDIS_FACTS[label]
    with RedisStore(url, rename(facts["name"])) as store:
        assert len(store) == facts["len"] == facts["keys"]
        assert store.contains_many([md5(t) for t in keys(facts["keys"])]).all()
        assert not store.contains_many([md5(t) for t in ABSENT]).any()
        start, stop = facts["receipt_batch"]
        batch = [md5(t) for t in keys(stop, start)]
        assert indices(store.add_many_once(batch, facts["receipt"].encode())) \
            == facts["receipt_flags"] != []
        assert not store.add_many_once(batch, b"another receipt").any()


def test_a_windowed_redis_store_of_0_1_0_keeps_its_windows(legacy_redis):
    from crawldedup.redis import RedisStore
    url, rename, client = legacy_redis
    facts = REDIS_FACTS["store-window"]
    windows = {rename(name): entry for name, entry in REDIS["keys"].items()
               if name.startswith("{" + REDIS["name_placeholder"] + ":window}")}
    assert windows and all("expire_at_ms" in entry for entry in windows.values())
    clock = facts["clock"]
    with RedisStore(url, rename(facts["name"]), window=facts["window"],
                    windows=facts["windows"], clock=lambda: clock) as store:
        assert len(store) == facts["len"] == facts["keys"]
        assert store.contains_many([md5(t) for t in keys(facts["keys"])]).all()
        assert store.add(md5(key(0))) is False
        assert store.add(md5("a digest 0.1.0 never saw")) is True
    # The add went to the window 0.1.0 wrote to, whose expiry it set again
    # (to the same time: another slot would end 12 hours away).
    for name, entry in windows.items():
        left = entry["expire_at_ms"] - time.time() * 1000
        assert abs(client.pttl(name) - left) < 60_000
    assert sum(client.scard(name) for name in windows) == facts["len"] + 1


def test_a_redis_simhash_index_of_0_1_0_answers_its_queries(legacy_redis):
    from crawldedup.redis import RedisSimhashIndex
    url, rename, _ = legacy_redis
    facts = REDIS_FACTS["simhash"]
    with RedisSimhashIndex(url, rename(facts["name"]), k=None) as index:
        assert (index.k, index.shards, len(index)) == (facts["k"], facts["shards"], facts["len"])
        for tagged, _fp in facts["ids"]:
            assert decode_id(tagged) in index
        for fp, found in facts["queries"]:
            assert index.query(fp) == [(decode_id(i), d) for i, d in found]
        assert any(found for _, found in facts["queries"])


def test_a_redis_recrawl_state_of_0_1_0_resumes(legacy_redis):
    from crawldedup.recrawl import RecrawlState
    url, rename, _ = legacy_redis
    facts = REDIS_FACTS["recrawl"]
    with RecrawlState(url, prefix=rename(facts["prefix"])) as state:
        check_recrawl(state, facts)
