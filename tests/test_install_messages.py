"""What crawldedup says when an optional dependency is missing (issue 30,
item 8): the command for PyPI and the one for a clone (how the README
installs, where ``pip install 'crawldedup[redis]'`` finds no distribution),
and the extras' pins.  Each case runs in a fresh interpreter in which the
dependency cannot be imported (``sys.modules[name] = None``, Python's way to
make ``import name`` raise ImportError)."""

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def both_forms(extra):
    return (f"pip install 'crawldedup[{extra}]' (or, in a clone of crawldedup, "
            f"pip install '.[{extra}]')")


def import_error_without(blocked, code):
    """The ImportError message that code raises when the modules blocked
    cannot be imported."""
    script = ("import sys\n"
              f"for name in {blocked!r}:\n"
              "    sys.modules[name] = None\n"
              "try:\n"
              + "".join(f"    {line}\n" for line in code.splitlines()) +
              "except ImportError as exc:\n"
              "    print(exc)\n"
              "else:\n"
              "    print('no ImportError')\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return run.stdout.decode().strip()


@pytest.mark.parametrize("extra, blocked, code, words", [
    ("redis", ["redis"], "from crawldedup.redis import RedisBloomFilter\n"
                         "RedisBloomFilter('redis://127.0.0.1:1/0', 'k', 10)", "redis-py"),
    ("redis", ["redis"], "from crawldedup.redis import RedisStore\n"
                         "RedisStore('redis://127.0.0.1:1/0', 'k')", "redis-py"),
    ("redis", ["redis"], "from crawldedup.recrawl.redis_store import _redis_module\n"
                         "_redis_module()", "RedisRecrawlStore"),
    ("redis", ["redis"], "from crawldedup.scrapy._redis_backend import _Redis\n"
                         "_Redis('redis://127.0.0.1:1/0', 'k')", "redis-py"),
    ("sql", ["sqlalchemy"], "from crawldedup import SQLStore\nSQLStore('sqlite:///x.db')",
     "SQLAlchemy 2"),
    ("sql", ["psycopg", "psycopg2"],
     "from crawldedup import SQLStore\n"
     "SQLStore('postgresql+psycopg://postgres@127.0.0.1:1/test')", "no driver"),
    ("scrapy", ["scrapy"], "import crawldedup.scrapy.dupefilter", "needs Scrapy"),
    ("scrapy", ["scrapy"], "import crawldedup.scrapy.fingerprinter", "needs Scrapy"),
    ("scrapy", ["scrapy"], "import crawldedup.scrapy.recrawl", "needs Scrapy"),
    ("spark", ["pyspark"], "import crawldedup.spark", "missing: pyspark"),
    ("warc", ["warcio", "warcio.archiveiterator"],
     "from crawldedup.warc import _need_warcio\n_need_warcio()", "needs warcio"),
    ("warc", ["resiliparse", "resiliparse.extract", "resiliparse.extract.html2text"],
     "from crawldedup.warc import html_to_text\nhtml_to_text(b'<p>x</p>')", "Resiliparse"),
])
def test_import_errors_give_both_install_commands(extra, blocked, code, words):
    message = import_error_without(blocked, code)
    assert words in message, message
    assert both_forms(extra) in message, message


def test_the_command_line_help_gives_both_install_commands():
    run = subprocess.run([sys.executable, "-m", "crawldedup", "urls", "--help"],
                         capture_output=True, timeout=120)
    text = " ".join(run.stdout.decode().split())  # argparse wraps the help
    assert both_forms("redis") in text and both_forms("sql") in text


def test_the_readme_gives_the_clone_form_of_every_extra_it_names():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"pip install 'crawldedup\[([a-z,]+)\]'", readme))
    assert {"redis", "sql", "scrapy", "spark,warc", "progress"} <= named
    for extra in named:
        assert f"'.[{extra}]'" in readme, extra


def extra_requirements(text, name):
    block = re.search(rf"^{name} = \[\n(.*?)^\]", text, re.S | re.M)
    assert block, name
    return re.findall(r'"([^"]+)"', block.group(1))


def test_pandas_is_below_3_where_pyspark_comes_with_it():
    # PySpark 4 warns "PySpark does not yet fully support pandas >= 3.0.0".
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for extra in ("spark", "test"):
        pandas = [r for r in extra_requirements(text, extra) if r.startswith("pandas")]
        assert pandas == ["pandas>=1.5,<3"], (extra, pandas)
