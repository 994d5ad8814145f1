"""Model sizes: the paper's, and small ones that train on two CPU cores.

Also the paper's numbers our models are checked against: the per-language vocabulary sizes of
Table 1 and the parameter counts of Table 6.
"""

from __future__ import annotations

from speechlab.asr.rnnt.config import ModelDims
from speechlab.errors import ConfigError

PRESETS: dict[str, ModelDims] = {
    # Section 5: 80 x 8 stacked fbank, 6 x 1024 LSTM encoder, 2 x 1024 LSTM prediction network.
    # Embedding and joint sizes are not stated; 1024 each reproduces Table 6 within 1%.
    "paper": ModelDims(),
    # Trains in minutes on 2 CPU cores; the same 640-dim stacked input as the paper.
    "demo": ModelDims(encoder_layers=3, encoder_dim=192, embed_dim=128, predictor_layers=2,
                      predictor_dim=128, joint_dim=192),
    # The small reproduction scale: wider than demo, for runs of several CPU hours.
    "small": ModelDims(encoder_layers=4, encoder_dim=320, embed_dim=192, predictor_layers=2,
                       predictor_dim=256, joint_dim=320),
    # Not the paper's encoder: causal Conv2d 4x subsampling + 6 causal Transformer layers
    # (3.2M encoder parameters), the fastest learner per CPU second measured here
    # (docs/multisoftmax.md); the prediction and joint networks as in "demo".
    "fast": ModelDims(encoder="transformer", encoder_layers=6, encoder_dim=192, heads=4,
                      ffn_dim=768, conv_channels=64, embed_dim=128, predictor_layers=1,
                      predictor_dim=192, joint_dim=192, dropout=0.1, lid_dim=256),
    # End-to-end pipeline tests on real 80-dim fbank: seconds per model.
    "ci": ModelDims(encoder_layers=1, encoder_dim=32, embed_dim=16, predictor_layers=1,
                    predictor_dim=32, joint_dim=32),
    # For unit tests: every code path, in milliseconds.
    "tiny": ModelDims(feature_dim=8, stack=4, stride=3, encoder_layers=2, encoder_dim=12,
                      embed_dim=6, predictor_layers=1, predictor_dim=10, joint_dim=14),
    # The transformer encoder's code paths in unit tests.
    "tiny_transformer": ModelDims(feature_dim=8, encoder="transformer", encoder_layers=2,
                                  encoder_dim=12, heads=2, ffn_dim=16, conv_channels=3,
                                  embed_dim=6, predictor_layers=1, predictor_dim=10,
                                  joint_dim=14, lid_dim=5),
}

# Table 1: graphemes + "B_"-prefixed graphemes + blank, per language.
PAPER_VOCAB_SIZES: dict[str, int] = {"en": 133, "hi": 59, "ta": 97, "gu": 123}

# Table 6: parameters in millions (Mono is the En-IN monolingual model).
PAPER_TABLE6: dict[str, float] = {
    "mono": 67.98,
    "vanilla": 68.95,
    "onehot": 68.98,
    "multisoftmax": 68.55,
    "multisoftmax_lsp": 118.94,
    "multisoftmax_lid": 70.08,
}


def get_preset(name: str) -> ModelDims:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown model preset {name!r}; choose one of {sorted(PRESETS)}") from None
