"""Fixtures of the identity-check tests."""

import pytest

from bnnpred.reproduce.identity_checks import single_thread


@pytest.fixture(scope="module")
def one_thread():
    """One thread for a test module: the identities page measures its claims on one thread (identities.measure),
    and two threads sum in another order, which moves the last bits of the numbers."""
    with single_thread():
        yield
