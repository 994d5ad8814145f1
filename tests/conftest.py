import os
from pathlib import Path

# Tests are sized for 2 cores; keep torch from oversubscribing them.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# What packages rebuild at load (a lean CTC package's graph) is cached per test session, never
# in the user's own cache.
if "SPEECHLAB_CACHE" not in os.environ:
    import tempfile

    os.environ["SPEECHLAB_CACHE"] = tempfile.mkdtemp(prefix="speechlab-test-cache-")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

HERE = Path(__file__).parent

#: Where the tests whose outcome rests on floating-point kernels live: they train, decode or
#: compare a model's numbers with a reference or a recording. They are marked `numerics`, and
#: `make test-kernels` runs them again on PyTorch's other SIMD paths (ATEN_CPU_CAPABILITY).
NUMERICS = ("asr", "ssl", "tts", "train", "search", "nn", "experiment/test_ci_tables.py",
            "test_inference.py", "serve/test_serve_api.py")


def pytest_collection_modifyitems(config, items):
    for item in items:
        where = Path(str(item.fspath)).relative_to(HERE).as_posix()
        if any(where == n or where.startswith(n + "/") for n in NUMERICS):
            item.add_marker(pytest.mark.numerics)
