"""The package under test is the one we think it is."""

import os
import pathlib

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


def test_installed_package_is_tested_when_ci_says_so(core):
    # .ci/run sets this: the suite must exercise the installed wheel, not src/.
    if os.environ.get("CRAWLDEDUP_EXPECT_INSTALLED") == "1":
        where = pathlib.Path(crawldedup.__file__).resolve()
        assert SOURCE_TREE not in where.parents, where
        assert "site-packages" in where.parts, where
    # Wherever the package comes from (the wheel, an editable or in-place
    # build), its compiled core sits beside it, whichever kernel it uses.
    where = pathlib.Path(crawldedup.__file__).resolve().parent
    assert pathlib.Path(core.__file__).resolve().parent == where, core.__file__


def test_wheel_ships_type_information():
    package = pathlib.Path(crawldedup.__file__).parent
    assert (package / "py.typed").is_file()


def test_version_is_single_sourced():
    # The installed metadata's version comes from _version.py (pyproject's
    # dynamic version), and pyproject.toml names no version of its own.
    from importlib.metadata import version

    from crawldedup._version import __version__
    assert version("crawldedup") == __version__
    pyproject = SOURCE_TREE.parent / "pyproject.toml"
    if pyproject.is_file():
        text = pyproject.read_text(encoding="utf-8")
        project = text.split("\n[project]\n", 1)[1].split("\n[", 1)[0]
        assert 'dynamic = ["version"]' in project
        assert "\nversion =" not in project
