"""Viterbi decoding over the decoding graph ``S_dec`` (eq. 8 of the CTC-topologies paper).

    W* = argmax_W [ log p(W) + alpha * max_{pi in Pi(W; S_dec)} log p(pi | X) ]

with kaldi-decoder's ``FasterDecoder`` (Kaldi's ``decode-faster``, as in the paper): beam 32 and
at most 2000 active states by default (Section 3.2). ``log p(W)`` is the graph's cost (the LM,
natural log); ``log p(pi | X) = sum_t logp[t, pi_t]`` (eq. 2). ``alpha`` multiplies the
log-probabilities handed to ``DecodableCtc`` (which has no scale of its own).

``log p(W)`` is the LM *as the graph encodes it*: a back-off grammar in the tropical semiring
scores a word by the best of its listed n-gram and every back-off route, and a back-off route
lands in a shorter history, so a path can score above the ARPA probability (the approximation
every WFST decoder with an n-gram ``G`` makes, Kaldi's ``decode-faster`` included; see
:func:`speechlab.testing.fst_paths.grammar_logprob`).

kaldi-decoder's decoders keep a bare reference to their graph: whoever builds one must keep the
FST object alive as long as the decoder (:class:`ViterbiDecoder` does; a freed graph crashes
the process).

Shapes: B batch, T frames, V tokens (network outputs; ``S_dec`` input label ``v + 1``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from speechlab.errors import ConfigError, DataError


@dataclass(frozen=True)
class ViterbiConfig:
    """Decoder settings (Section 3.2 of the paper for the defaults).

    Args:
        beam: pruning beam in cost units (nats of ``-log p(W) - alpha log p(pi|X)``).
        max_active: most states kept per frame.
        min_active: fewest states kept per frame.
        acoustic_weight: ``alpha`` of eq. (8), tuned on a dev set
            (:func:`tune_acoustic_weight`).
        beam_delta: FasterDecoder's beam increment when ``max_active`` cuts in.
    """

    beam: float = 32.0
    max_active: int = 2000
    min_active: int = 20
    acoustic_weight: float = 1.0
    beam_delta: float = 0.5

    def __post_init__(self) -> None:
        if not self.beam > 0:
            raise ConfigError(f"beam must be > 0, got {self.beam}")
        if not 0 < self.min_active <= self.max_active:
            raise ConfigError(f"need 0 < min_active <= max_active, got {self.min_active}, "
                              f"{self.max_active}")
        if not (self.acoustic_weight > 0 and math.isfinite(self.acoustic_weight)):
            raise ConfigError(f"acoustic_weight must be a positive number, got "
                              f"{self.acoustic_weight}")

    def options(self):
        """These settings as ``kaldi_decoder.FasterDecoderOptions``."""
        import kaldi_decoder

        return kaldi_decoder.FasterDecoderOptions(
            beam=self.beam, max_active=self.max_active, min_active=self.min_active,
            beam_delta=self.beam_delta)


@dataclass(frozen=True)
class ViterbiResult:
    """The best path of one utterance.

    ``words``: word ids (0 never appears). ``tokens`` (T,): the token of each frame on the best
    path. ``lm_score``: ``log p(W)`` (the graph's weights, natural log). ``am_score``:
    ``log p(pi|X)``, unscaled. ``score``: ``lm_score + alpha * am_score``, the quantity eq. (8)
    maximizes. ``reached_final``: the path ends in a final state (otherwise the best partial
    path is returned, as Kaldi does).
    """

    words: tuple[int, ...]
    tokens: np.ndarray
    score: float
    lm_score: float
    am_score: float
    reached_final: bool
    # The frame on which each word's label comes on the best path (for word times): the
    # first frame of the word's first phone, where the lexicon puts its word label.
    word_frames: tuple[int, ...] = ()


def acoustic_matrix(log_probs, acoustic_weight: float = 1.0) -> np.ndarray:
    """``alpha * log_probs`` as the C-contiguous float32 (T, V) array ``DecodableCtc`` reads.

    ``log_probs`` (T, V): numpy array or torch tensor of per-frame log-probabilities.
    """
    if hasattr(log_probs, "detach"):
        log_probs = log_probs.detach().cpu().numpy()
    x = np.asarray(log_probs)
    if x.ndim != 2:
        raise DataError(f"log-probabilities must be (T, V), got shape {x.shape}")
    if acoustic_weight != 1.0:
        x = x * acoustic_weight
    return np.ascontiguousarray(x, dtype=np.float32)


class ViterbiDecoder:
    """Viterbi decoding of eq. (8) over one graph, reused across utterances.

    Args:
        fst: ``S_dec`` (:attr:`speechlab.asr.ctc.graphs.DecodingGraph.fst`), input labels
            ``token + 1``.
        num_tokens: V; every log-probability matrix must have V columns (DecodableCtc does
            not check the labels it reads).
        config: decoder settings.
    """

    def __init__(self, fst, num_tokens: int, config: ViterbiConfig = ViterbiConfig()) -> None:
        import kaldi_decoder

        self.fst = fst  # the C++ decoder holds a reference; keep the graph alive with it
        self.num_tokens = num_tokens
        self.config = config
        self._decoder = kaldi_decoder.FasterDecoder(fst, config.options())

    def decode(self, log_probs) -> ViterbiResult:
        """Best path for one utterance. ``log_probs`` (T, V) numpy or torch, T >= 1."""
        import kaldi_decoder
        import kaldifst

        alpha = self.config.acoustic_weight
        x = acoustic_matrix(log_probs, alpha)
        if x.shape[1] != self.num_tokens or x.shape[0] == 0:
            raise DataError(f"log-probabilities of shape {tuple(x.shape)} do not fit a graph "
                            f"over {self.num_tokens} tokens (need (T>=1, {self.num_tokens}))")
        self._decoder.decode(kaldi_decoder.DecodableCtc(x))
        reached = self._decoder.reached_final()
        ok, path = self._decoder.get_best_path(use_final_probs=True)
        if not ok:
            raise DataError(f"no path through the graph survived the beam ({self.config.beam}) "
                            f"for {x.shape[0]} frames")
        ok, ilabels, olabels, weight = kaldifst.get_linear_symbol_sequence(path)
        tokens = np.asarray(ilabels, dtype=np.int64) - 1
        lm = -float(weight.value1)
        am = -float(weight.value2) / alpha
        return ViterbiResult(tuple(olabels), tokens, lm + alpha * am, lm, am, reached,
                             _word_frames(path))


def _word_frames(path) -> tuple[int, ...]:
    """Walk the linear best path: the frame (token arcs before it) each word label is on.
    (The path is a Kaldi lattice, read through its text form: one arc per line,
    ``src dst ilabel olabel weights``.)"""
    arcs: dict[int, tuple[int, int, int]] = {}
    for line in path.to_str().splitlines():
        f = line.split()
        if len(f) >= 4:
            arcs[int(f[0])] = (int(f[1]), int(f[2]), int(f[3]))
    frames: list[int] = []
    state, frame = path.start, 0
    for _ in range(len(arcs)):
        if state not in arcs:
            break
        state, ilabel, olabel = arcs[state]
        if olabel != 0:
            frames.append(frame)
        if ilabel != 0:
            frame += 1
    return tuple(frames)


def decode_batch(decoder: ViterbiDecoder, log_probs, lengths) -> list[ViterbiResult]:
    """:meth:`ViterbiDecoder.decode` for each utterance of a padded batch.

    ``log_probs`` (B, T, V) numpy or torch; ``lengths`` (B,) valid frames per utterance.
    """
    if hasattr(log_probs, "detach"):
        log_probs = log_probs.detach().cpu().numpy()
    lengths = np.asarray(lengths.cpu() if hasattr(lengths, "cpu") else lengths)
    if log_probs.ndim != 3 or lengths.shape != (log_probs.shape[0],):
        raise DataError(f"need log_probs (B, T, V) and lengths (B,), got {log_probs.shape} and "
                        f"{lengths.shape}")
    return [decoder.decode(log_probs[b, : int(n)]) for b, n in enumerate(lengths)]


@dataclass(frozen=True)
class AcousticWeightSearch:
    """Result of :func:`tune_acoustic_weight`: the best ``alpha`` and every tried one's error."""

    best: float
    errors: dict[float, float]


def tune_acoustic_weight(fst, num_tokens: int, dev: Sequence, error: Callable[[list], float],
                         weights: Sequence[float] = (0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0),
                         config: ViterbiConfig = ViterbiConfig()) -> AcousticWeightSearch:
    """Pick ``alpha`` of eq. (8) on a dev set (Section 3.2: "we tune it on each development set").

    Args:
        dev: per-utterance log-probability matrices, each (T_i, V).
        error: scores one decoding of the whole dev set, given the list of
            :class:`ViterbiResult` in ``dev`` order (e.g. WER against the references);
            lower is better.
        weights: candidates; ties go to the one listed first.
    """
    if not weights:
        raise ConfigError("tune_acoustic_weight needs at least one candidate weight")
    errors: dict[float, float] = {}
    for alpha in weights:
        decoder = ViterbiDecoder(fst, num_tokens, _replace(config, acoustic_weight=alpha))
        errors[float(alpha)] = float(error([decoder.decode(x) for x in dev]))
    best = min(errors, key=lambda a: errors[a])  # min keeps the first of equal errors
    return AcousticWeightSearch(best, errors)


def _replace(config: ViterbiConfig, **changes) -> ViterbiConfig:
    import dataclasses

    return dataclasses.replace(config, **changes)
