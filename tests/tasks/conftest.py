"""The task layer between real nodes joined by an in-process relay (``tests.support.fakes``)."""

import pytest

from tests.support.fakes import FakeHub


@pytest.fixture
def hub() -> FakeHub:
    return FakeHub()
