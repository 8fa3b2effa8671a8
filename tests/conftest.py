"""Shared pytest fixtures for the bnnpred test suite.

- ``isolated_cwd``: every test runs in its own temporary folder.
- ``data_root``: the real data folder (``BNNPRED_DATA_DIR``, else ``shared/data`` next to the repository);
  skips the test when it is absent and points ``BNNPRED_DATA_DIR`` at it for the test's duration.

Tests marked ``slow`` (a whole study or campaign script end to end on the real data: minutes each on 2 cores)
are skipped with that reason unless ``BNNPRED_SLOW_TESTS=1`` (``make test-slow``): ``make test``'s budget is 10
minutes on 2 cores.
"""

import os
from pathlib import Path

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):  # `make test` runs one worker per core: one thread each, for every process
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # it starts too (torch reads it when first imported)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skips the tests marked ``slow`` unless ``BNNPRED_SLOW_TESTS=1``."""
    if os.environ.get("BNNPRED_SLOW_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="slow: a whole study or campaign script end to end; `make test-slow` runs it")
    for test in items:
        if test.get_closest_marker("slow"):
            test.add_marker(skip)


@pytest.fixture
def data_root(monkeypatch: pytest.MonkeyPatch) -> Path:
    from tests.helpers import real_data_root  # not above: it imports torch, which must see OMP_NUM_THREADS first

    root = real_data_root()
    monkeypatch.setenv("BNNPRED_DATA_DIR", str(root))
    return root


@pytest.fixture(autouse=True)
def float64_default():
    """Identities are checked in float64."""
    import torch

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


@pytest.fixture(autouse=True)
def isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs write relative paths (``runs/``, the fit cache) into the test's own folder, not the repository."""
    monkeypatch.chdir(tmp_path)
