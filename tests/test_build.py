"""The package under test is the one we think it is."""

import os
import pathlib
import sys

import crawldedup
from crawldedup import _kernel

SOURCE_TREE = pathlib.Path(__file__).resolve().parent.parent / "src"


def test_selected_implementation_follows_the_environment():
    if os.environ.get("CRAWLDEDUP_PURE_PYTHON") == "1":
        assert crawldedup.IMPLEMENTATION == "reference"
        assert _kernel.impl.__name__ == "crawldedup._reference"
    else:
        assert crawldedup.IMPLEMENTATION == "core"
        assert _kernel.impl.__name__ == "crawldedup._core"
        assert crawldedup.BloomFilter.__mro__[1].__module__ == "crawldedup._core"


def test_compiled_core_is_a_real_extension_module(core):
    suffix = pathlib.Path(core.__file__).suffix
    assert suffix in (".so", ".pyd"), core.__file__
    assert core.IMPLEMENTATION == "core"


def test_installed_package_is_tested_when_ci_says_so():
    # .ci/run sets this: the suite must exercise the installed wheel, not src/.
    if os.environ.get("CRAWLDEDUP_EXPECT_INSTALLED") == "1":
        where = pathlib.Path(crawldedup.__file__).resolve()
        assert SOURCE_TREE not in where.parents, where
        assert "site-packages" in where.parts, where
    else:
        assert crawldedup.__file__ is not None


def test_wheel_ships_type_information():
    package = pathlib.Path(crawldedup.__file__).parent
    assert (package / "py.typed").is_file()
    assert not list(package.glob("*.pyx"))


def test_version_is_single_sourced():
    from crawldedup._version import __version__
    assert crawldedup.__version__ == __version__
    if sys.version_info >= (3, 8):
        from importlib.metadata import version
        assert version("crawldedup") == __version__
