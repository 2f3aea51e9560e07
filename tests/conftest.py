import pytest

from attnlab.experiments.jiang2024 import FAMILY


@pytest.fixture
def family():
    return FAMILY
