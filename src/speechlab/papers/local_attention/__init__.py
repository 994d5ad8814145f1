"""The wav2vec 2.0 local-attention paper's reproduction: its recipe, jobs and data
(:mod:`.recipe`), its plan (:mod:`.reproduce`) and its tables (:mod:`.tables`). The model
family it runs is the library's :mod:`speechlab.ssl.wav2vec2`, which knows nothing of this
package."""
