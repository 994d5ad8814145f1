"""The SALAD paper's reproduction: its recipe and roles (:mod:`.recipe`), its plan
(:mod:`.reproduce`) and its tables and sounds (:mod:`.tables`). The model family it runs is the
library's :mod:`speechlab.tts`, which knows nothing of this package."""
