#!/usr/bin/env python3
"""``crawldedup urls`` side by side with the tools users pipe URLs through:
``awk '!seen[$0]++'``, ``sort -u`` and a Python ``set`` loop.

One run, one machine, one generated file: --lines (default 3,000,000) URL
lines, --repeats (default 35%) of them repeats of an earlier line, the
distinct URLs from ``benchmarks/url_corpus.py`` (e-commerce, news and forum
URLs with tracking parameters, percent-encoded Chinese, and 3% odd URLs
outside the compiled canonicalization fast path).  The file is generated
once per (lines, repeats, seed) in --workdir and reused.

Commands, each run --reps times (default 3) in turn (round robin, so the
machine's noise falls on all alike), reading the file and writing to a file
in --workdir, every crawldedup run with a fresh state:

* ``awk '!seen[$0]++' FILE`` (the reference of the ratios);
* ``LC_ALL=C sort -u FILE`` (sorted output, not the input order);
* a Python loop over ``sys.stdin.buffer`` with a ``set``;
* ``crawldedup urls FILE --state S`` in Bloom mode (the default),
  ``--exact``, ``--canonical``, ``--canonical --exact`` and
  ``--db sqlite:///S.db``.

Reported per command: the median wall time, the CPU time (user + system,
all threads: on a busy machine the steadier measure), the peak RSS of the process
(its ``wait4`` rusage), the lines it printed, the speed in input lines per
second, and the ratio ``awk time / its time`` ("x faster than awk").  The
issue's targets are checked and printed at the end: every local mode at least
3x faster than awk, but the canonical modes (``--canonical``, with or
without ``--exact``) at least 2.5x, as awk does no canonicalization;
``--exact`` within 1.5x of Bloom mode; ``--db sqlite:///`` at least 100,000
lines/s.

Usage::

    python benchmarks/compare_cli.py                   # 3,000,000 lines
    python benchmarks/compare_cli.py --lines 300000 --reps 1   # quick look
    python benchmarks/compare_cli.py --only bloom,exact,awk

crawldedup is run as ``python -m crawldedup`` with this interpreter (so
``PYTHONPATH=src`` picks a checkout).  Writes compare_cli.md and
compare_cli.json to --out (default benchmarks/results/).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent

SET_LOOP = ("import sys\n"
            "seen = set()\n"
            "write = sys.stdout.buffer.write\n"
            "for line in sys.stdin.buffer:\n"
            "    if line not in seen:\n"
            "        seen.add(line)\n"
            "        write(line)\n")


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_input(path: Path, lines: int, repeats: float, seed: int) -> int:
    """Write the input file; returns the number of distinct lines."""
    distinct = lines - int(lines * repeats)
    corpus = _load(HERE / "url_corpus.py", "url_corpus")
    urls = corpus.realistic_urls(distinct, seed)
    rng = random.Random(f"compare_cli:{seed}")
    # Which lines repeat an earlier one: a random choice of line numbers
    # (never the first); a repeat copies a random URL already written.
    repeat_at = set(rng.sample(range(1, lines), lines - distinct))
    out: List[str] = []
    next_new = 0
    for i in range(lines):
        if i in repeat_at and next_new:
            out.append(urls[rng.randrange(next_new)])
        else:
            out.append(urls[next_new])
            next_new += 1
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(out) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    path.with_suffix(".json").write_text(json.dumps({"distinct": len(set(out))}))
    return distinct


def commands(data: Path, work: Path) -> Dict[str, Dict[str, Any]]:
    py = sys.executable
    cd = [py, "-m", "crawldedup", "urls", str(data), "--state"]
    state = str(work / "state")
    c_env = dict(os.environ, LC_ALL="C")
    return {
        "awk": {"label": "awk '!seen[$0]++'", "argv": ["awk", "!seen[$0]++", str(data)]},
        "sort": {"label": "LC_ALL=C sort -u", "argv": ["sort", "-u", str(data)], "env": c_env},
        "pyset": {"label": "Python set loop", "argv": [py, "-c", SET_LOOP], "stdin": data},
        "bloom": {"label": "crawldedup urls (Bloom)", "argv": cd + [state], "state": state},
        "exact": {"label": "crawldedup urls --exact", "argv": cd + [state, "--exact"],
                  "state": state},
        "canonical": {"label": "crawldedup urls --canonical",
                      "argv": cd + [state, "--canonical"], "state": state},
        "canonical-exact": {"label": "crawldedup urls --canonical --exact",
                            "argv": cd + [state, "--canonical", "--exact"], "state": state},
        "db": {"label": "crawldedup urls --db sqlite:///", "local": False,
               "argv": cd + [state, "--db", f"sqlite:///{work / 'state.db'}"],
               "state": state, "db": str(work / "state.db")},
    }


def _clean(spec: Dict[str, Any]) -> None:
    for key in ("state", "db"):
        if key in spec:
            for suffix in ("", ".lock", ".log", ".pending", "-wal", "-shm", "-journal"):
                try:
                    os.unlink(spec[key] + suffix)
                except FileNotFoundError:
                    pass


def run_once(spec: Dict[str, Any], out_path: Path) -> Dict[str, Any]:
    """Wall time, peak RSS (MiB) and printed lines of one run."""
    _clean(spec)
    stdin = open(spec["stdin"], "rb") if "stdin" in spec else subprocess.DEVNULL
    try:
        with open(out_path, "wb") as out:
            start = time.perf_counter()
            proc = subprocess.Popen(spec["argv"], stdin=stdin, stdout=out,
                                    stderr=subprocess.PIPE, env=spec.get("env"))
            assert proc.stderr is not None
            err = proc.stderr.read()
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if stdin is not subprocess.DEVNULL:
            stdin.close()
    if proc.returncode != 0:
        raise SystemExit(f"{spec['label']} failed ({proc.returncode}): {err.decode()[-2000:]}")
    with open(out_path, "rb") as f:
        printed = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    # ru_maxrss is in KiB on Linux, bytes on macOS.
    rss = usage.ru_maxrss / (2**20 if sys.platform == "darwin" else 2**10)
    _clean(spec)
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mib": rss,
            "printed": printed}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=3_000_000)
    parser.add_argument("--repeats", type=float, default=0.35)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", help="comma-separated subset of: awk, sort, pyset, bloom, "
                                       "exact, canonical, canonical-exact, db")
    parser.add_argument("--workdir", type=Path,
                        default=Path(tempfile.gettempdir()) / "crawldedup-compare-cli")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)

    args.workdir.mkdir(parents=True, exist_ok=True)
    data = args.workdir / f"urls-{args.lines}-{args.repeats:g}-{args.seed}.txt"
    meta = data.with_suffix(".json")
    if not (data.exists() and meta.exists()):
        # In a child process: the peak RSS of every command below is measured
        # with wait4, and a fork carries the parent's high-water mark along.
        t = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--generate", str(data), str(args.lines),
                        str(args.repeats), str(args.seed)], check=True)
        print(f"generated {data} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    distinct = json.loads(meta.read_text())["distinct"]
    specs = commands(data, args.workdir)
    names = list(specs)
    if args.only:
        wanted = [n.strip() for n in args.only.split(",")]
        unknown = [n for n in wanted if n not in specs]
        if unknown:
            parser.error(f"--only: unknown {unknown}; choose from {names}")
        names = [n for n in names if n in wanted]
    for name in names:
        if specs[name]["argv"][0] in ("awk", "sort") and not shutil.which(specs[name]["argv"][0]):
            print(f"skipping {name}: not installed", file=sys.stderr)
            names.remove(name)

    runs: Dict[str, List[Dict[str, Any]]] = {name: [] for name in names}
    for rep in range(args.reps):
        for name in names:
            result = run_once(specs[name], args.workdir / f"out-{name}.txt")
            runs[name].append(result)
            print(f"rep {rep + 1}/{args.reps} {name}: {result['wall']:.2f} s, "
                  f"{result['rss_mib']:.0f} MiB", file=sys.stderr)
    for name in names:
        try:
            os.unlink(args.workdir / f"out-{name}.txt")
        except FileNotFoundError:
            pass

    rows = []
    awk = statistics.median(r["wall"] for r in runs["awk"]) if "awk" in runs else None
    for name in names:
        wall = statistics.median(r["wall"] for r in runs[name])
        rows.append({"name": name, "label": specs[name]["label"], "wall": wall,
                     "cpu": statistics.median(r["cpu"] for r in runs[name]),
                     "walls": [r["wall"] for r in runs[name]],
                     "rss_mib": max(r["rss_mib"] for r in runs[name]),
                     "printed": runs[name][-1]["printed"],
                     "lines_per_s": args.lines / wall,
                     "vs_awk": (awk / wall) if awk else None})

    command = "python benchmarks/compare_cli.py " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:]))
    header = (f"{args.lines:,} lines, {args.repeats:.0%} repeats ({distinct:,} distinct), "
              f"seed {args.seed}, median of {args.reps}; {platform.platform()}, "
              f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
              f"Python {platform.python_version()}")
    table = ["| command | time (s) | CPU (s) | peak RSS (MiB) | lines printed | lines/s "
             "| x faster than awk |", "|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        ratio = f"{row['vs_awk']:.2f}" if row["vs_awk"] is not None else "-"
        table.append(f"| `{row['label']}` | {row['wall']:.2f} | {row['cpu']:.2f} | "
                     f"{row['rss_mib']:.0f} | "
                     f"{row['printed']:,} | {row['lines_per_s']:,.0f} | {ratio} |")

    by = {row["name"]: row for row in rows}
    checks = []
    if awk:
        # The issue's --canonical target (2.5x: awk does no canonicalization)
        # stands for the canonical modes in place of the 3x of the others.
        for name, least in (("bloom", 3.0), ("exact", 3.0), ("canonical", 2.5),
                            ("canonical-exact", 2.5)):
            if name in by:
                checks.append((f"{by[name]['label']} >= {least:g}x faster than awk",
                               by[name]["vs_awk"] >= least, f"{by[name]['vs_awk']:.2f}x"))
    if "exact" in by and "bloom" in by:
        r = by["exact"]["wall"] / by["bloom"]["wall"]
        checks.append(("--exact within 1.5x of Bloom mode", r <= 1.5, f"{r:.2f}x Bloom's time"))
    if "db" in by:
        checks.append(("--db sqlite:/// >= 100,000 lines/s", by["db"]["lines_per_s"] >= 100_000,
                       f"{by['db']['lines_per_s']:,.0f} lines/s"))
    lines_out = ["# crawldedup urls vs awk, sort -u and a Python set", "", header, "",
                 *table, "", "Targets:", ""]
    lines_out += [f"- {'PASS' if ok else 'MISS'} {what}: {value}" for what, ok, value in checks]
    lines_out += ["", f"Reproduce: `{command.strip()}`"]
    text = "\n".join(lines_out) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare_cli.md").write_text(text)
    (args.out / "compare_cli.json").write_text(json.dumps(
        {"header": header, "rows": rows, "checks": checks, "command": command}, indent=1))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--generate"]:
        make_input(Path(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
        sys.exit(0)
    sys.exit(main())
