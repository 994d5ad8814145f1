import os

# Tests are sized for 2 cores; keep torch from oversubscribing them.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

torch.set_num_threads(1)
