"""Shared fixtures: both kernel implementations, hypothesis profiles, services.

Kernel tests take the ``impl`` fixture and run once against the compiled core
and once against the pure-Python twin.  Each is imported by its own name, so a
missing or broken build fails loudly instead of quietly testing Python twice.
"""

import importlib
import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "ci", max_examples=300, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=3000, deadline=None)
settings.load_profile(os.environ.get("CRAWLDEDUP_HYPOTHESIS_PROFILE", "dev"))

IMPLEMENTATIONS = ["core", "reference"]


def load_impl(name):
    module = {"core": "crawldedup._core", "reference": "crawldedup._reference"}[name]
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - a broken build must fail
        pytest.fail(f"cannot import {module}: {exc}", pytrace=False)


@pytest.fixture(params=IMPLEMENTATIONS, scope="session")
def impl(request):
    """One kernel module: crawldedup._core, then crawldedup._reference."""
    return load_impl(request.param)


@pytest.fixture(scope="session")
def core():
    return load_impl("core")


@pytest.fixture(scope="session")
def reference():
    return load_impl("reference")
