"""Declares the one compiled extension; all metadata lives in pyproject.toml.

CRAWLDEDUP_DEBUG_BUILD=1 builds with -O0 -g, assertions and Cython line tracing
(for coverage of .pyx lines and for sanitizers); release builds use -O3.
"""
import glob
import os
import sys

from Cython.Build import cythonize
from setuptools import Extension, setup

debug = os.environ.get("CRAWLDEDUP_DEBUG_BUILD") == "1"

directives = {
    "language_level": 3,
    "embedsignature": True,
    "binding": True,
    "boundscheck": False,
    "wraparound": False,
    "cdivision": True,
    "initializedcheck": False,
}
macros = []
if debug:
    directives.update(boundscheck=True, wraparound=True, initializedcheck=True, linetrace=True)
    macros.append(("CYTHON_TRACE_NOGIL", "1"))

if sys.platform == "win32":
    compile_args = ["/O2"] if not debug else ["/Od", "/Zi"]
else:
    compile_args = ["-O3"] if not debug else ["-O0", "-g3", "-UNDEBUG"]

ext = Extension(
    "crawldedup._core",
    sources=["src/_core.pyx"],
    include_dirs=["src"],
    define_macros=macros,
    extra_compile_args=compile_args,
    depends=sorted(glob.glob("src/*.h") + glob.glob("src/*.pxi") + glob.glob("src/*.pxd")),
)

setup(ext_modules=cythonize([ext], compiler_directives=directives))
