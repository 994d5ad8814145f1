"""A fixture that runs a test on both code paths of the losses: the numba kernels the CPU uses
and the PyTorch code a GPU runs (:func:`speechlab.devices.device_code`), here on the CPU.

In a test module::

    from speechlab.testing.devices import loss_path  # noqa: F401 (a fixture)
    pytestmark = pytest.mark.usefixtures("loss_path")
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from speechlab.devices import device_code

LOSS_PATHS = ("numba", "device")


@pytest.fixture(params=LOSS_PATHS)
def loss_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """The path this run of the test takes: ``"numba"`` or ``"device"``."""
    with device_code(request.param == "device"):
        yield request.param
