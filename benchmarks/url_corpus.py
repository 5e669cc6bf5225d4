"""A realistic, deterministic corpus of crawler URLs for the URL benchmarks and
the differential tests against w3lib.

``realistic_urls(n, seed)`` returns n distinct URLs mixing what a crawler's
frontier holds: e-commerce product and list pages (JD, Taobao/Tmall, Amazon
style, with ``spm``/``utm_*``/``gclid`` tracking), news articles (Sina, NetEase,
Xinhua, BBC style dated paths), Chinese search and tag pages with
percent-encoded UTF-8 (upper and lower case hex) and some raw Chinese, forum
threads, query strings with repeated and empty keys, bare keys, ``+`` for
spaces, ``;`` parameters, fragments, ports, mixed-case schemes and hosts, and a
small share of URLs outside the compiled fast path (userinfo, IDNA hosts,
IPv6, spaces) so the fallback is measured too.  Only ``random.Random`` is
used, so the corpus is the same on every machine.

Run it to print a sample: ``python benchmarks/url_corpus.py 20``.
"""
from __future__ import annotations

import random
import sys
from urllib.parse import quote

__all__ = ["realistic_urls"]

_CJK = ["新闻", "体育", "财经", "科技", "娱乐", "军事", "汽车", "房产", "教育", "旅游",
        "手机", "笔记本电脑", "连衣裙", "运动鞋", "家用电器", "零食", "口红", "图书",
        "北京", "上海", "深圳", "杭州", "疫情", "人工智能", "新能源汽车", "世界杯"]
_WORDS = ["the", "new", "how", "best", "city", "plans", "report", "market", "price",
          "review", "update", "deal", "team", "season", "policy", "energy", "climate",
          "phone", "launch", "record", "trade", "global", "china", "world", "tech"]
_TRACKING = ["utm_source", "utm_medium", "utm_campaign", "utm_content", "utm_term",
             "gclid", "fbclid", "spm", "scm", "from", "ref", "share_from", "msclkid"]
_TRACK_VALUES = ["google", "wechat", "weibo", "newsletter", "a2h0c.8166622.PhoneSokuUgc_1",
                 "1.2.3.4", "cpc", "email", "Cj0KCQiA", "IwAR3xyz", "home_feed"]
_NEWS_HOSTS = ["news.sina.com.cn", "www.163.com", "www.xinhuanet.com", "www.bbc.co.uk",
               "www.nytimes.com", "finance.sina.com.cn", "news.qq.com", "www.thepaper.cn",
               "www.reuters.com", "tech.ifeng.com", "www.chinanews.com.cn"]
_SHOP_HOSTS = ["item.jd.com", "list.jd.com", "search.jd.com", "item.taobao.com",
               "detail.tmall.com", "s.taobao.com", "www.amazon.com", "www.amazon.co.jp",
               "mobile.yangkeduo.com", "www.ebay.com", "product.suning.com"]
_FORUM_HOSTS = ["bbs.tianya.cn", "tieba.baidu.com", "www.zhihu.com", "www.douban.com",
                "forum.example.org", "bbs.hupu.com"]


def _q(rng: random.Random, text: str) -> str:
    """Percent-encode text; sometimes with lower-case hex, sometimes raw."""
    r = rng.random()
    if r < 0.08:
        return text                              # raw non-ASCII (browsers send it encoded)
    enc = quote(text, safe="")
    return enc.lower() if r < 0.2 else enc


def _tracking(rng: random.Random) -> list[tuple[str, str]]:
    return [(rng.choice(_TRACKING), rng.choice(_TRACK_VALUES))
            for _ in range(rng.choice([0, 0, 0, 1, 1, 2, 3]))]


def _query(params: list[tuple[str, str]], rng: random.Random) -> str:
    parts = []
    for k, v in params:
        r = rng.random()
        if r < 0.03:
            parts.append(k)                      # bare key
        elif r < 0.06:
            parts.append(f"{k}=")                # empty value
        else:
            parts.append(f"{k}={v}")
    if parts and rng.random() < 0.04:
        parts.insert(rng.randrange(len(parts)), "")   # "&&"
    return "&".join(parts)


def _shop(rng: random.Random, uid: int) -> tuple[str, str, list[tuple[str, str]]]:
    host = rng.choice(_SHOP_HOSTS)
    t = rng.randrange(6)
    if t == 0:
        return host, f"/{uid}.html", []
    if t == 1:
        return host, "/item.htm", [("id", str(uid)), ("ali_refid", f"a3_{uid % 997}")]
    if t == 2:
        return host, "/Search", [("keyword", _q(rng, rng.choice(_CJK))), ("enc", "utf-8"),
                                 ("page", str(uid % 50)), ("wq", _q(rng, rng.choice(_CJK)))]
    if t == 3:
        slug = "-".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 5)))
        return host, f"/{slug}/dp/B0{uid:08X}", [("th", "1"), ("psc", "1")][:rng.randint(0, 2)]
    if t == 4:
        return host, "/list.html", [("cat", f"{uid % 9000},{uid % 700},{uid % 31}"),
                                    ("ev", f"exbrand_{_q(rng, rng.choice(_CJK))}"),
                                    ("page", str(uid % 20)), ("sort", "sort_totalsales15_desc"),
                                    ("cat", str(uid % 13))]      # repeated key
    return host, "/goods.html", [("goods_id", str(uid)), ("page_from", "23"),
                                  ("refer_page_name", "index"), ("refer_page_id", f"10002_{uid}")]


def _news(rng: random.Random, uid: int) -> tuple[str, str, list[tuple[str, str]]]:
    host = rng.choice(_NEWS_HOSTS)
    y, m, d = rng.randint(2015, 2025), rng.randint(1, 12), rng.randint(1, 28)
    t = rng.randrange(6)
    if t == 0:
        return host, f"/{y}-{m:02d}-{d:02d}/doc-i{uid:x}{rng.randrange(36**4):x}.shtml", []
    if t == 1:
        return host, f"/{y % 100:02d}/{m:02d}{d:02d}/{d:02d}/H{uid:X}0001899O.html", []
    if t == 2:
        slug = "-".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 7)))
        return host, f"/{y}/{m:02d}/{d:02d}/world/{slug}.html", [("smid", "url-share")]
    if t == 3:
        return host, f"/tag/{_q(rng, rng.choice(_CJK))}/{uid}", [("page", str(uid % 9))]
    if t == 4:
        return host, f"/news/articles/c{uid:x}o", [("at_medium", "RSS"),
                                                   ("at_campaign", "KARANGA")]
    return host, f"/politics/{y}{m:02d}{d:02d}/{uid}.htm", []


def _forum(rng: random.Random, uid: int) -> tuple[str, str, list[tuple[str, str]]]:
    host = rng.choice(_FORUM_HOSTS)
    t = rng.randrange(4)
    if t == 0:
        return host, "/forum/viewthread.php", [("tid", str(uid)), ("extra", "page%3D1"),
                                               ("page", str(uid % 7))]
    if t == 1:
        return host, f"/p/{uid}", [("pn", str(uid % 5)), ("see_lz", "1")]
    if t == 2:
        return host, f"/question/{uid}/answer/{uid * 7 % 10**9}", []
    return host, "/f", [("kw", _q(rng, rng.choice(_CJK))), ("ie", "utf-8"),
                        ("pn", str(uid % 500 * 50))]


def _odd(rng: random.Random, uid: int) -> str:
    """URLs outside (or at the edge of) the compiled fast path."""
    t = rng.randrange(12)
    if t == 0:
        return f"http://user:pa%20ss@www.example.com/private/{uid}?a=1"
    if t == 1:
        return f"http://例子.测试/{_q(rng, rng.choice(_CJK))}/{uid}"
    if t == 2:
        return f"http://[2001:db8::{uid % 65535:x}]:8080/path/{uid}"
    if t == 3:
        return f" http://www.example.com/a b/{uid}?q=x y "
    if t == 4:
        return f"https://www.example.com/a/./b/../c/%2e%2E/{uid};jsessionid=AB{uid:X}?x=1"
    if t == 5:
        return f"HTTPS://WWW.Example.COM:0443/%7Euser/%41%42%zz%/{uid}?%61=%62&+a+=+b+"
    if t == 6:
        return f"https://www.example.com/{uid}?q=%E4%B8%AD%E6%96%87&q=%e4%b8%ad&q=&q"
    if t == 7:
        return f"https://www.example.com/p/{uid}/[x]|{{y}}<z>^`\"?a='1'&b=[2]#frag|{uid}"
    if t == 8:
        return f"http://www.example.com/{uid}\\windows\\path?x=1\\2"
    if t == 9:
        return f"ftp://ftp.example.com/pub/file{uid}.tar.gz"
    if t == 10:
        return f"https://www.example.com/search?q={uid}&sort=&&&page=2#results"
    return f"https://m.example.com/{uid}#/app/route?x=1&y=2"


def realistic_urls(n: int = 100_000, seed: int = 7) -> list[str]:
    """n distinct URLs (see the module docstring); the same for the same seed."""
    rng = random.Random(f"crawldedup-url-corpus:{seed}")
    out: list[str] = []
    seen: set[str] = set()
    uid = 10_000_000
    while len(out) < n:
        uid += 1
        r = rng.random()
        if r < 0.03:
            url = _odd(rng, uid)
        else:
            kind = rng.random()
            make = _shop if kind < 0.45 else _news if kind < 0.85 else _forum
            host, path, params = make(rng, uid)
            params = list(params) + _tracking(rng)
            if params and rng.random() < 0.5:
                rng.shuffle(params)
            scheme = "https" if rng.random() < 0.85 else "http"
            if rng.random() < 0.03:
                scheme, host = scheme.upper(), host.upper()
            if rng.random() < 0.01:
                host += rng.choice([":80", ":443", ":8080"])
            url = f"{scheme}://{host}{path}"
            q = _query(params, rng)
            if q or rng.random() < 0.01:
                url += "?" + q
            if rng.random() < 0.05:
                url += "#" + rng.choice(["comments", "top", "J_DetailMeta", "reply", "p2",
                                         "%E8%AF%84%E8%AE%BA"])
        if url not in seen:
            seen.add(url)
            out.append(url)
    return out


if __name__ == "__main__":
    for u in realistic_urls(int(sys.argv[1]) if len(sys.argv) > 1 else 20):
        print(u)
