"""wav2vec 2.0 with block-level attention diagnosis and local self-attention (the
local-attention paper, Chen & Asgari).

- :func:`build` (:mod:`.model`): the pre-training model of a preset, some blocks local.
- :func:`local_attention` (:mod:`.attention`): banded softmax attention, exact, O(T x radius).
- :mod:`.diagnose`: per-block attention maps, their statistics and ``classify``.
- :mod:`.pretrain`, :mod:`.finetune`: the trainer's tasks; :mod:`.training`: training one
  model with them; :mod:`.decode`: greedy and LM beam search, and decoding sets of waveforms;
  :mod:`.checkpoint_import`: Hugging Face and fairseq checkpoints from disk.
- ``speechlab reproduce local-attention``: :mod:`.recipe` (config, jobs, data),
  :mod:`.reproduce` (the plan), :mod:`.tables`.

See ``docs/local-attention.md``.
"""

from speechlab.ssl.wav2vec2.attention import local_attention
from speechlab.ssl.wav2vec2.config import PRESETS, Wav2Vec2Config, parse_blocks, preset
from speechlab.ssl.wav2vec2.model import Wav2Vec2, Wav2Vec2CTC, build

__all__ = ["PRESETS", "Wav2Vec2", "Wav2Vec2CTC", "Wav2Vec2Config", "build", "local_attention",
           "parse_blocks", "preset"]
