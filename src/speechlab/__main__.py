"""``python -m speechlab``: the console script, e.g. under torchrun (``-m speechlab train ...``)."""

import sys

from speechlab.cli import main

sys.exit(main())
