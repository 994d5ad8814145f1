"""Multi-softmax streaming multilingual RNN-T (Joshi et al.): models, search, LID-free decoding.

Parts: ``encoder`` (stacked-fbank LSTM), ``predictor`` (embedding + LSTM), ``joiner``
(shared projections, per-language output layers), ``model`` (the family and its ``build``
factory), ``search`` (greedy/beam, streaming; its ``decode`` decodes a batch), ``multilingual_decode``
(parallel per-language decoders picked by the LID head), ``networks`` (what the searches run:
the streaming encoder and the prediction/joint networks, in PyTorch), ``onnx_graphs`` (the
same as ONNX graphs run by onnxruntime), ``early_stop`` (Section 6.3),
``decode`` (sets of utterances, scored), ``training`` (one model, from scratch or fine-tuned).
The loss lives in ``loss``; the paper's reproduction in ``recipe``, ``reproduce`` and
``tables``.
"""

from speechlab.asr.rnnt.config import (
    VARIANTS,
    DecodeConfig,
    EarlyStopConfig,
    ModelDims,
    RNNTConfig,
    SearchConfig,
    VariantSpec,
)
from speechlab.asr.rnnt.early_stop import EarlyStopper, active_frames, t_avg
from speechlab.asr.rnnt.model import (
    RNNT,
    Route,
    UnionMap,
    build,
    build_from_config,
    count_parameters,
    format_parameter_table,
    lid_ce_loss,
    parameter_table,
)
from speechlab.asr.rnnt.multilingual_decode import LidFreeDecoder, LidFreeResult, decode_lid_free
from speechlab.asr.rnnt.networks import RnntNetworks
from speechlab.asr.rnnt.presets import PAPER_TABLE6, PAPER_VOCAB_SIZES, PRESETS
from speechlab.asr.rnnt.search import (
    SEARCHES,
    StreamingDecoder,
    TransducerScorer,
    TransducerSearch,
    search_for,
)

__all__ = [
    "PAPER_TABLE6", "PAPER_VOCAB_SIZES", "PRESETS", "RNNT", "SEARCHES", "VARIANTS",
    "DecodeConfig", "EarlyStopConfig", "EarlyStopper", "LidFreeDecoder",
    "LidFreeResult", "ModelDims", "RNNTConfig", "RnntNetworks", "Route", "SearchConfig",
    "StreamingDecoder",
    "TransducerScorer", "TransducerSearch", "UnionMap", "VariantSpec", "active_frames", "build", "build_from_config",
    "count_parameters", "decode_lid_free", "format_parameter_table", "lid_ce_loss",
    "parameter_table", "search_for", "t_avg",
]
