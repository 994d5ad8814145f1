"""The CTC-topologies paper's reproduction: its recipe and data (:mod:`.recipe`), its plan
(:mod:`.reproduce`), decoding sets of utterances and measuring their lattices
(:mod:`.decoding`) and its tables (:mod:`.tables`). The model family it runs is the library's
:mod:`speechlab.asr.ctc`, which knows nothing of this package."""
