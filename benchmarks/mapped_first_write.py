"""What checking a mapped state file before its first change costs.

A process's first change to a mapped Bloom filter file checks the file's
checksum (one CRC-32 pass) before marking it DIRTY, so that damage is never
sealed in as valid (docs/format.md).  This measures, on one file of the
given capacity, in one run:

* ``open``: opening without reading the bits (the default above 64 MiB);
* ``open verify=True``: opening with the checksum checked up front;
* ``first add``: the first add_many after opening (checks the file, then
  adds the batch), against the first add_many of a process that checked the
  file at opening (``verify=True``): the difference is the check (both pay
  the page faults of a first touch);
* ``close``: the last writer's seal (one CRC-32 pass).

    python benchmarks/mapped_first_write.py [--capacity 100000000] [--batch 10000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import crawldedup


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=100_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="crawldedup-bench-")
    path = os.path.join(folder, "seen.bloom")
    rows: dict = {}
    try:
        with crawldedup.BloomFilter.open(path, capacity=args.capacity):
            pass
        size = os.path.getsize(path)
        for rep in range(args.repeat):
            batch = [f"https://example.com/{rep}/{i}" for i in range(args.batch)]
            again = [f"https://example.com/{rep}/again/{i}" for i in range(args.batch)]
            t_open, bf = timed(lambda: crawldedup.BloomFilter.open(path))
            t_first, _ = timed(lambda: bf.add_many(batch))
            t_later, _ = timed(lambda: bf.add_many(again))
            t_close, _ = timed(bf.close)
            # Checked at opening: the first add does not check again.
            t_verify, bf = timed(lambda: crawldedup.BloomFilter.open(path, verify=True))
            t_checked, _ = timed(lambda: bf.add_many([k + "/v" for k in batch]))
            bf.close()
            for name, value in (("open", t_open), ("first add (checks the file)", t_first),
                                ("later add", t_later), ("close (seals)", t_close),
                                ("open verify=True (checks the file)", t_verify),
                                ("first add after verify=True", t_checked)):
                rows.setdefault(name, []).append(value)
    finally:
        try:
            os.unlink(path)
        finally:
            os.rmdir(folder)
    med = {name: statistics.median(values) for name, values in rows.items()}
    print(f"capacity {args.capacity:,}: a {size / 2**20:,.0f} MiB file; batches of "
          f"{args.batch:,} keys; median of {args.repeat} ({crawldedup.IMPLEMENTATION})")
    print("| step | ms |")
    print("|---|---|")
    for name, value in med.items():
        print(f"| {name} | {value * 1e3:,.2f} |")
    check = med["first add (checks the file)"] - med["first add after verify=True"]
    print(f"\nthe check before the first change: {check * 1e3:,.1f} ms "
          f"({size / max(check, 1e-9) / 2**30:,.2f} GiB/s), "
          f"{check / med['close (seals)']:.2f}x the close's seal, once per writing process")


if __name__ == "__main__":
    main()
