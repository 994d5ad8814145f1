"""The multi-softmax RNN-T paper's reproduction: its recipe and data (:mod:`.recipe`), its plan
(:mod:`.reproduce`), decoding and scoring its test sets (:mod:`.decoding`) and its tables
(:mod:`.tables`). The model family it runs is the library's :mod:`speechlab.asr.rnnt`, which
knows nothing of this package."""
