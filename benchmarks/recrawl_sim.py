"""Re-crawl scheduling simulation: freshness and age under a fixed budget.

100,000 URLs on 1,000 sites change as Poisson processes with known rates,
skewed as the web is: most pages change rarely (weeks to months), a few
sites change hourly, some pages never change.  Every policy starts from the
same first crawl of every URL at time 0 and then gets the same fixed number
of fetches a day, spent hour by hour, for 30 simulated days.  A fetch tells
the policy only what a crawler sees: whether the page changed since the
previous fetch (Cho & Garcia-Molina's sampled history).

Policies:

* uniform: every URL in turn (the oldest fetch first);
* proportional: each URL fetched at a frequency proportional to its TRUE
  change rate (the "fetch the fast pages more often" intuition);
* nutch: Apache Nutch's AdaptiveFetchSchedule (interval x1.4 when unchanged,
  x0.8 when changed, 60 s to 365 days; the initial interval is set to the
  budget's uniform interval instead of Nutch's 30 days, which would leave the
  budget unused for a month; leftover budget is spent on the pages due next);
* crawldedup: the real ``RecrawlState`` (SQLite store) with
  ``ChangeRatePolicy(budget_per_day=...)``: it learns each page's rate from
  the verdicts of its own fetches (estimator, host pooling) and asks ``due``
  for the next hour's fetches;
* oracle: the optimal allocation for the TRUE rates (Cho & Garcia-Molina's
  Lagrangian solution: equal marginal freshness for every page), each page
  fetched at its optimal fixed interval.

Freshness = share of pages whose copy is up to date; age = time since the
copy went stale (0 when fresh).  Both are averaged hourly over all 30 days
and over day 30 alone.

Run:  PYTHONPATH=src python benchmarks/recrawl_sim.py [--urls 100000] [--days 30]
      [--budget 10000] [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from crawldedup.recrawl import ChangeRatePolicy, NutchPolicy, RecrawlState
from crawldedup.recrawl.schedule import optimal_interval, solve_mu

DAY = 86400.0
HOUR = 3600.0


def make_rates(n_urls: int, n_hosts: int, rng: np.random.Generator):
    """Per-URL change rates (per second) and hosts."""
    host = np.arange(n_urls) % n_hosts
    kind = rng.choice(4, size=n_hosts, p=[0.15, 0.60, 0.20, 0.05])
    base = np.empty(n_hosts)
    # 0: static sites (their pages never change)
    base[kind == 0] = 0.0
    # 1: most sites: a change every 1 to 8 weeks
    k1 = kind == 1
    base[k1] = 1.0 / (np.exp(rng.uniform(np.log(7), np.log(60), k1.sum())) * DAY)
    # 2: news-like: every 8 hours to every 3 days
    k2 = kind == 2
    base[k2] = 1.0 / (np.exp(rng.uniform(np.log(8 / 24), np.log(3), k2.sum())) * DAY)
    # 3: a few hourly sites: 4 to 48 changes a day
    k3 = kind == 3
    base[k3] = np.exp(rng.uniform(np.log(4), np.log(48), k3.sum())) / DAY
    rate = base[host] * np.exp(rng.normal(0.0, 0.7, n_urls))
    rate[rng.random(n_urls) < 0.10] = 0.0  # archives: never change
    return rate, host


class World:
    """The true pages, seen through one policy's fetches."""

    def __init__(self, rate: np.ndarray, rng: np.random.Generator) -> None:
        self.rate = rate
        self.rng = rng
        n = len(rate)
        self.last = np.zeros(n)
        self.version = np.zeros(n, dtype=np.int64)
        self.stale_at = self._next_change(np.zeros(n), np.arange(n))
        self.fresh_sum = 0.0
        self.age_sum = 0.0
        self.samples = 0
        self.day_fresh: list = []
        self.day_age: list = []
        self._fresh_today: list = []
        self._age_today: list = []
        self.fetches = 0

    def _next_change(self, now, idx) -> np.ndarray:
        lam = self.rate[idx]
        with np.errstate(divide="ignore"):
            wait = np.where(lam > 0, self.rng.exponential(1.0, len(idx)) / np.where(
                lam > 0, lam, 1.0), np.inf)
        return now + wait

    def fetch(self, idx: np.ndarray, now: float) -> np.ndarray:
        """Fetch pages idx at now; returns whether each changed since its last fetch."""
        idx = np.asarray(idx, dtype=np.int64)
        changed = self.stale_at[idx] <= now
        self.version[idx[changed]] += 1
        self.stale_at[idx] = self._next_change(now, idx)
        self.last[idx] = now
        self.fetches += len(idx)
        return changed

    def sample(self, now: float, end_of_day: bool) -> None:
        fresh = float(np.mean(self.stale_at > now))
        age = float(np.mean(np.maximum(0.0, now - self.stale_at)))
        self._fresh_today.append(fresh)
        self._age_today.append(age)
        if end_of_day:
            self.day_fresh.append(float(np.mean(self._fresh_today)))
            self.day_age.append(float(np.mean(self._age_today)))
            self._fresh_today, self._age_today = [], []


def simulate(name, rate, host, days, budget_per_day, seed, tmpdir):
    rng = np.random.default_rng(seed)
    world = World(rate, rng)
    n = len(rate)
    per_hour = int(round(budget_per_day / 24))
    steps = int(days * 24)
    state = None
    urls = None
    index = None
    t0 = time.perf_counter()
    if name == "uniform":
        pass
    elif name in ("proportional", "oracle"):
        if name == "proportional":
            total = rate.sum()
            freq = budget_per_day / DAY * rate / total
        else:
            mu = solve_mu(rate, budget_per_day / DAY, HOUR, 1e9)
            freq = 1.0 / optimal_interval(rate, mu, HOUR, 1e9)
            freq[rate == 0] = 0.0
        with np.errstate(divide="ignore"):
            interval = np.where(freq > 0, 1.0 / np.where(freq > 0, freq, 1.0), np.inf)
        next_fetch = rng.uniform(0, 1, n) * interval  # random phase
    elif name == "nutch":
        policy = NutchPolicy(default_interval=n / budget_per_day * DAY)
        interval = np.full(n, policy.default_interval)
        next_fetch = rng.uniform(0, 1, n) * interval
    elif name == "crawldedup":
        path = os.path.join(tmpdir, "sim.db")
        state = RecrawlState(path, policy=ChangeRatePolicy(budget_per_day=budget_per_day,
                                                           min_interval=HOUR),
                             canonical=False)
        urls = [f"https://site{h}.example/page{i}" for i, h in enumerate(host.tolist())]
        index = {u: i for i, u in enumerate(urls)}
        batch = 20000
        for s in range(0, n, batch):
            state.record_many([{"url": urls[i], "status": 200, "time": 0.0,
                                "digest": _digest(i, 0)} for i in range(s, min(n, s + batch))])
    else:
        raise ValueError(name)
    for step in range(1, steps + 1):
        now = step * HOUR
        if name == "uniform":
            idx = np.argpartition(world.last, per_hour)[:per_hour]
            world.fetch(idx, now)
        elif name in ("proportional", "oracle", "nutch"):
            due = np.flatnonzero(next_fetch <= now)
            if name == "nutch" and len(due) < per_hour:
                due = np.argpartition(next_fetch, per_hour)[:per_hour]  # fill the budget
            if len(due) > per_hour:
                due = due[np.argpartition(next_fetch[due], per_hour)[:per_hour]]
            changed = world.fetch(due, now)
            if name == "nutch":
                iv = interval[due] * np.where(changed, 1 - policy.dec_rate, 1 + policy.inc_rate)
                interval[due] = np.clip(iv, policy.min_interval, policy.max_interval)
                next_fetch[due] = now + interval[due]
            else:
                next_fetch[due] = next_fetch[due] + interval[due]
                late = next_fetch[due] < now
                next_fetch[due[late]] = now + interval[due[late]]
        else:
            chosen = state.due(now, per_hour, fill=True)
            idx = np.array([index[u] for u in chosen], dtype=np.int64)
            world.fetch(idx, now)
            versions = world.version[idx].tolist()
            state.record_many([{"url": u, "status": 200, "time": now, "digest": _digest(i, v)}
                               for u, i, v in zip(chosen, idx.tolist(), versions)])
        world.sample(now, step % 24 == 0)
    if state is not None:
        state.close()
    seconds = time.perf_counter() - t0
    return world, seconds


def _digest(i: int, version: int) -> bytes:
    return i.to_bytes(8, "little") + version.to_bytes(8, "little")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, default=100_000)
    parser.add_argument("--hosts", type=int, default=1_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--budget", type=int, default=10_000, help="fetches a day")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policies", default="uniform,proportional,nutch,crawldedup,oracle")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    rate, host = make_rates(args.urls, args.hosts, rng)
    per_day = rate * DAY
    print(f"{args.urls:,} URLs on {args.hosts:,} sites; changes a day: "
          f"never {np.mean(rate == 0):.0%}, "
          f"< 1/week {np.mean((per_day > 0) & (per_day < 1 / 7)):.0%}, "
          f"1/week..1/day {np.mean((per_day >= 1 / 7) & (per_day < 1)):.0%}, "
          f"1..24 {np.mean((per_day >= 1) & (per_day < 24)):.0%}, >= hourly "
          f"{np.mean(per_day >= 24):.1%}; budget {args.budget:,} fetches a day "
          f"({args.budget / args.urls:.0%} of the URLs), {args.days} days, hourly steps")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.policies.split(","):
            world, seconds = simulate(name, rate, host, args.days, args.budget, args.seed + 1,
                                      tmp)
            results[name] = (world, seconds)
    oracle = results.get("oracle")
    print()
    print(f"{'policy':<14}{'freshness (30 d)':>18}{'freshness day ' + str(args.days):>20}"
          f"{'vs oracle':>11}{'age (h, 30 d)':>15}{'age day ' + str(args.days) + ' (h)':>17}"
          f"{'fetches':>11}{'seconds':>9}")
    for name, (world, seconds) in results.items():
        mean_f = float(np.mean(world.day_fresh))
        last_f = world.day_fresh[-1]
        ratio = "" if oracle is None else f"{last_f / oracle[0].day_fresh[-1]:.1%}"
        print(f"{name:<14}{mean_f:>18.4f}{last_f:>20.4f}{ratio:>11}"
              f"{np.mean(world.day_age) / HOUR:>15.1f}{world.day_age[-1] / HOUR:>17.1f}"
              f"{world.fetches:>11,}{seconds:>9.1f}")
    print()
    print("freshness by day (every 5th day):")
    for name, (world, _) in results.items():
        print(f"  {name:<12}" + " ".join(f"{f:.3f}" for f in world.day_fresh[4::5]))
    print(f"\nreproduce: PYTHONPATH=src python benchmarks/recrawl_sim.py --urls {args.urls} "
          f"--hosts {args.hosts} --days {args.days} --budget {args.budget} --seed {args.seed}")


if __name__ == "__main__":
    main()
