"""Statistical parametric speech synthesis: the SALAD paper's acoustic models and their data.

- :mod:`.model`: SALAD and the MUSA-RNN baseline; :func:`build` gives Table 1's presets.
- :mod:`.questions`, :mod:`.labels`: HTS full-context labels -> per-frame linguistic features.
- :mod:`.acoustic`: WORLD analysis to the 43 acoustic dims, and synthesis back to a waveform.
- :mod:`.corpus`: the embedded festival corpus and the reader of wav + label corpora.
- :mod:`.batching`, :mod:`.task`: the paper's stateful batches and the trainer's task.
- :mod:`.training`, :mod:`.evaluate`, :mod:`.latency`: training one model, scoring it on a test
  set (Table 2), timing it (Fig. 3).
- :mod:`.synthesis`: a trained model directory's side files, and speech from labels with it.
- :mod:`.recipe`, :mod:`.reproduce`, :mod:`.tables`: ``speechlab reproduce salad``.

See ``docs/salad.md``.
"""

from speechlab.tts.model import AcousticModelConfig, build, build_from_config, num_parameters

__all__ = ["AcousticModelConfig", "build", "build_from_config", "num_parameters"]
