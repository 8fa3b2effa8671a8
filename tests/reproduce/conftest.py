"""Fixtures of the identity-check tests."""

import helpers
import pytest

from bnnpred.reproduce.identity_checks import single_thread


@pytest.fixture(scope="session", autouse=True)
def shared_measurements(tmp_path_factory):
    """The identity checks' measurements are shared between pytest-xdist's workers in the session's temporary folder
    (a worker's own is ``.../pytest-N/popen-gwK``), which pytest removes with old sessions' folders."""
    helpers.SHARED = tmp_path_factory.getbasetemp().parent


@pytest.fixture(scope="module")
def one_thread():
    """One thread for a test module: the identities page measures its claims on one thread (identities.measure),
    and two threads sum in another order, which moves the last bits of the numbers."""
    with single_thread():
        yield
