# SPDX-License-Identifier: Apache-2.0
"""Fixtures: the installed plugin folder (WSEL_PLUGIN_DIR, set by
tests/bindings/python.sh to <prefix>/lib/wsel/plugins)."""
import os

import pytest

import wsel


@pytest.fixture(scope="session")
def plugin_dir() -> str:
    d = os.environ.get("WSEL_PLUGIN_DIR")
    if not d or not os.path.isdir(d):
        pytest.skip("WSEL_PLUGIN_DIR (the installed plugins) is not set")
    return d


@pytest.fixture
def host():
    with wsel.Host(seed=7) as h:
        yield h


# Three ranks; row 2 (worker 11, rank 0) is the unique cheapest.
RANKS = [
    wsel.RankState(10, 0, active_blocks=50),
    wsel.RankState(10, 1, active_blocks=40),
    wsel.RankState(11, 0, active_blocks=5),
]
