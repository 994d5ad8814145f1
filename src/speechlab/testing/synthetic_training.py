"""Each paper's training task on synthetic utterances: the model of a recipe scale, the paper's
own task (batching, losses) over random features and labels of the recipe's batch shapes, and
a count of the utterances and audio seconds each batch holds.

``PAPERS[name](scale)`` returns ``(model, task, count)``; wrap the task in :class:`Counting` to
count what training consumes. ``benchmarks/train_throughput.py`` times them at the ``small``
scale; the tests train them a few updates at the ``ci`` scale, on every device and precision.
The data means nothing: a step costs what a real one costs.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

SEED = 0


# ------------------------------------------------------------------------------------------
# Counting what a task trains on


class Counting:
    """A task that counts the utterances and audio seconds of the batches it is given."""

    def __init__(self, task: Any, count: Callable[[Any], tuple[int, float]]) -> None:
        self._task, self._count = task, count
        self.utterances, self.seconds = 0, 0.0

    def batches(self):
        return self._task.batches()

    def loss(self, model, batch):
        n, s = self._count(batch)
        self.utterances += n
        self.seconds += s
        return self._task.loss(model, batch)

    def validate(self, model):
        return self._task.validate(model)

    def __getattr__(self, name: str) -> Any:  # set_step, state_dict: the task's own
        return getattr(self._task, name)


def _frames(seconds: float, rng: np.random.Generator, n: int) -> list[int]:
    """n utterance lengths in 10 ms frames, 2 to ``seconds`` s."""
    return [int(x) for x in rng.integers(200, int(seconds * 100), n)]


# ------------------------------------------------------------------------------------------
# The papers


def multisoftmax(scale: str = "small", utterances: int = 64) -> tuple[Any, Any, Callable]:
    from speechlab.asr.data import Utterance
    from speechlab.asr.rnnt.model import build
    from speechlab.asr.rnnt.task import RNNTTask
    from speechlab.experiment.recipes import load_recipe
    from speechlab.papers.multisoftmax.recipe import MultiSoftmaxConfig

    cfg = load_recipe(MultiSoftmaxConfig, "multisoftmax", scale)
    rng = np.random.default_rng(SEED)
    vocab = 40
    dims = cfg.dims()
    utts = [Utterance(f"{lang}{i}", lang, torch.randn(t, dims.feature_dim), "x",
                      tuple(int(v) for v in rng.integers(1, vocab, max(1, t // 12))))
            for lang in cfg.languages for i, t in enumerate(_frames(6.0, rng, utterances))]
    torch.manual_seed(SEED)
    model = build("multisoftmax_lid", {lang: vocab for lang in cfg.languages}, dims)
    task = RNNTTask(model, utts, utts[:8], cfg.task, seed=SEED)

    def count(group):
        batches = getattr(group, "batches", [group])
        return (sum(len(b.ids) for b in batches),
                sum(float(b.x_lens.sum()) for b in batches) / 100)

    return model, task, count


def topologies(topology: str = "S1-T1") -> Callable[..., tuple[Any, Any, Callable]]:
    def make(scale: str = "small", utterances: int = 128) -> tuple[Any, Any, Callable]:
        from speechlab.asr.ctc.model import build
        from speechlab.asr.ctc.task import CtcTask
        from speechlab.asr.data import Utterance
        from speechlab.experiment.recipes import load_recipe
        from speechlab.papers.topologies.recipe import TopologiesConfig, model_config

        cfg = load_recipe(TopologiesConfig, "topologies", scale)
        rng = np.random.default_rng(SEED)
        phones = 40
        mcfg = model_config(cfg, topology, phones, "en")
        utts = [Utterance(f"u{i}", "en", torch.randn(t, mcfg.feature_dim), "x",
                          tuple(int(v) for v in rng.integers(1, phones + 1, max(1, t // 16))))
                for i, t in enumerate(_frames(6.0, rng, utterances))]
        torch.manual_seed(SEED)
        model = build(mcfg)
        task = CtcTask(topology, utts, utts[:8], cfg.task, seed=SEED)
        return model, task, lambda b: (len(b.ids), float(b.x_lens.sum()) / 100)

    return make


def local_attention(scale: str = "small", utterances: int = 64) -> tuple[Any, Any, Callable]:
    from speechlab.experiment.recipes import load_recipe
    from speechlab.papers.local_attention.recipe import LocalAttentionConfig, model_config
    from speechlab.ssl.wav2vec2.model import build_from_config
    from speechlab.ssl.wav2vec2.pretrain import PretrainTask

    cfg = load_recipe(LocalAttentionConfig, "local-attention", scale)
    rng = np.random.default_rng(SEED)
    wavs = [torch.from_numpy(rng.standard_normal(t * 160).astype(np.float32) * 0.1)
            for t in _frames(8.0, rng, utterances)]
    torch.manual_seed(SEED)
    model = build_from_config(model_config(cfg))
    task = PretrainTask(wavs, wavs[:4], cfg.pretrain_task, seed=SEED)
    samples = task.samples
    return model, task, lambda b: (len(b), sum(min(len(w), samples) for w in b) / 16000)


def salad(scale: str = "small", utterances: int = 48) -> tuple[Any, Any, Callable]:
    from speechlab.experiment.recipes import load_recipe
    from speechlab.papers.salad.recipe import SaladConfig, model_config
    from speechlab.tts.acoustic import OutputNormalizer
    from speechlab.tts.features import TtsUtteranceData
    from speechlab.tts.model import build_from_config
    from speechlab.tts.task import TtsTask

    cfg = load_recipe(SaladConfig, "salad", scale)
    # the Big SALAD where the scale trains it, else its first SALAD
    role = max((r for r in cfg.roles() if r.family == "salad"), key=lambda r: r.size == "big")
    rng = np.random.default_rng(SEED)
    questions, outputs = 420, 43
    utts = []
    for i, t in enumerate(_frames(5.0, rng, utterances)):
        t *= 2  # 5 ms frames
        n = max(1, t // 20)
        utts.append(TtsUtteranceData(
            f"u{i}", rng.standard_normal((n, questions)).astype(np.float32),
            np.minimum(np.arange(t) // 20, n - 1), rng.random((t, 2)).astype(np.float32),
            rng.random((t, outputs)).astype(np.float32), ["a"] * n))
    norm = OutputNormalizer(np.zeros(outputs), np.ones(outputs))
    torch.manual_seed(SEED)
    model = build_from_config(model_config(cfg, role, questions + 2))
    task = TtsTask(utts, utts[:4], norm, cfg.task, seed=SEED)
    return model, task, lambda b: (int(b.x.shape[0]), float(b.lens.sum()) * 0.005)


PAPERS: dict[str, Callable[..., tuple[Any, Any, Callable]]] = {
    "multisoftmax": multisoftmax,
    "topologies": topologies("S1-T1"),
    "topologies-S3-T2*": topologies("S3-T2★"),
    "local-attention": local_attention,
    "salad": salad,
}
