"""On a CUDA GPU (skipped elsewhere; scripts/gpu-check.sh runs them): the losses on the device
equal the numba kernels on the CPU, and every paper's training task trains there in fp32,
bf16 and fp16 and resumes on the CPU and back."""

from __future__ import annotations

import math

import pytest
import torch

from speechlab.asr.ctc import topology
from speechlab.asr.ctc.loss import graph_loss
from speechlab.asr.rnnt.loss import rnnt_loss, rnnt_loss_fused, rnnt_loss_pruned
from speechlab.testing.synthetic_training import PAPERS
from speechlab.train.config import TrainConfig
from speechlab.train.log import read_log
from speechlab.train.trainer import Trainer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

CUDA = torch.device("cuda")


def _close(on_gpu, on_cpu, dtype):
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-8, atol=1e-9)
    for a, b in zip(on_gpu, on_cpu):
        assert a.device.type == "cuda"
        torch.testing.assert_close(a.cpu(), b, **tol)


class Joiner(torch.nn.Module):
    def __init__(self, dim: int, vocab: int):
        super().__init__()
        self.out = torch.nn.Linear(dim, vocab)

    def forward(self, enc, pred):
        return self.out(torch.tanh(enc + pred))


def test_the_losses_run_as_cuda_kernels_on_an_nvidia_gpu():
    """numba's CUDA target builds speechlab's kernels here; else every step of an RNN-T or a
    graph loss falls back to the PyTorch-ops recursions, launch-bound on a GPU (docs/gpu.md)."""
    from speechlab import devices

    assert devices.use_cuda_kernels(torch.zeros(1, device=CUDA)), "numba sees no CUDA here"
    logits = torch.randn(2, 5, 4, 6, device=CUDA, requires_grad=True)
    rnnt_loss(logits, torch.tensor([[1, 2, 3], [2, 3, 0]], device=CUDA),
              torch.tensor([5, 4], device=CUDA), torch.tensor([3, 2], device=CUDA)).backward()
    log_probs = torch.randn(2, 8, 7, device=CUDA).log_softmax(-1).requires_grad_()
    graph_loss(log_probs, torch.tensor([8, 6], device=CUDA),
               torch.tensor([[1, 2], [3, 1]], device=CUDA), torch.tensor([2, 2], device=CUDA),
               topology="S2-T1").sum().backward()
    assert devices._kernels_failure is None, devices._kernels_failure  # built and launched


@pytest.mark.parametrize("path", ["kernels", "torch ops"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rnnt_losses_on_cuda_equal_the_numba_kernels(dtype, path, monkeypatch):
    from speechlab.devices import CUDA_KERNELS_ENV

    if path == "torch ops":
        monkeypatch.setenv(CUDA_KERNELS_ENV, "0")
    gen = torch.Generator().manual_seed(0)
    batch, frames, labels, vocab, dim = 4, 40, 12, 30, 16
    logits = torch.randn(batch, frames, labels + 1, vocab, generator=gen, dtype=dtype)
    targets = torch.randint(1, vocab, (batch, labels), generator=gen)
    t_lens, u_lens = torch.tensor([40, 31, 9, 20]), torch.tensor([12, 5, 12, 0])
    enc = torch.randn(batch, frames, dim, generator=gen, dtype=dtype)
    pred = torch.randn(batch, labels + 1, dim, generator=gen, dtype=dtype)
    am = torch.randn(batch, frames, vocab, generator=gen, dtype=dtype)
    lm = torch.randn(batch, labels + 1, vocab, generator=gen, dtype=dtype)
    torch.manual_seed(0)
    joiner = Joiner(dim, vocab).to(dtype)

    def run(device):
        j = Joiner(dim, vocab).to(device, dtype)
        j.load_state_dict(joiner.state_dict())
        x, e, p, a, m = (t.to(device).requires_grad_() for t in (logits, enc, pred, am, lm))
        y, tl, ul = targets.to(device), t_lens.to(device), u_lens.to(device)
        full = rnnt_loss(x, y, tl, ul, reduction="sum")
        fused = rnnt_loss_fused(e, p, j, y, tl, ul, reduction="sum")
        pruned = rnnt_loss_pruned(e, p, j, y, tl, ul, am=a, lm=m, s_range=4, reduction="sum")
        total = full + fused + pruned.simple + pruned.pruned
        grads = torch.autograd.grad(total, [x, e, p, a, m])
        return [full.detach(), fused.detach(), pruned.simple.detach(), pruned.pruned.detach(),
                *grads]

    _close(run(CUDA), run(torch.device("cpu")), dtype)


@pytest.mark.parametrize("path", ["kernels", "torch ops"])
@pytest.mark.parametrize("name", list(topology.TOPOLOGIES))
def test_graph_loss_on_cuda_equals_the_numba_kernels(name, path, monkeypatch):
    from speechlab.devices import CUDA_KERNELS_ENV

    if path == "torch ops":
        monkeypatch.setenv(CUDA_KERNELS_ENV, "0")
    gen = torch.Generator().manual_seed(1)
    phones, batch, frames = 12, 5, 60
    vocab = topology.num_tokens(name, phones)
    log_probs = torch.randn(batch, frames, vocab, generator=gen).log_softmax(-1)
    targets = torch.randint(1, phones + 1, (batch, 10), generator=gen)
    t_lens, u_lens = torch.tensor([60, 44, 30, 3, 0]), torch.tensor([10, 7, 9, 8, 0])

    def run(device):
        lp = log_probs.to(device).requires_grad_()
        cost = graph_loss(lp, t_lens.to(device), targets.to(device), u_lens.to(device),
                          topology=name)
        ok = torch.isfinite(cost)
        (grad,) = torch.autograd.grad(cost[ok].sum(), lp)
        return [cost.detach(), grad]

    _close(run(CUDA), run(torch.device("cpu")), torch.float32)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("paper", list(PAPERS))
def test_each_paper_trains_on_cuda_and_resumes_on_the_cpu_and_back(tmp_path, paper, precision):
    model, task, _ = PAPERS[paper]("ci", utterances=8)
    for steps, device in ((2, "cuda"), (3, "cpu"), (4, "cuda")):
        cfg = TrainConfig(max_steps=steps, log_every=1, checkpoint_every=1, progress=False,
                          precision=precision if device == "cuda" else "fp32")
        trainer = Trainer(model, task, cfg, tmp_path, device=device)
        assert next(model.parameters()).device.type == device
        trainer.fit()
    losses = [r["loss"] for r in read_log(tmp_path / "log.jsonl") if r["kind"] == "train"]
    assert len(losses) == 4 and all(math.isfinite(x) for x in losses), losses


@pytest.mark.parametrize("name", ["ctc", "salad", "wav2vec2", "rnnt"])
def test_every_kind_of_model_runs_its_networks_on_cuda(tmp_path, name):
    """speechlab.load(..., device="cuda"): the networks' outputs equal the CPU's within float
    tolerance (the searches then run on the CPU as ever), and a transcript or speech comes
    out."""
    import numpy as np

    from speechlab.testing.audio import tone_samples
    from speechlab.testing.device_models import models, outputs

    load = models(tmp_path)[name]
    cpu, gpu = load(), load().to("cuda")
    audio = np.concatenate([tone_samples(1.0, 300.0), tone_samples(1.0, 900.0)])
    if name in ("ctc", "wav2vec2"):
        np.testing.assert_allclose(gpu.log_probs(audio), cpu.log_probs(audio), atol=1e-3)
    elif name == "rnnt":
        feats = torch.randn(40, 80)
        on_cpu = cpu.networks.encoder(feats, cpu.networks.encoder.init_state("en"))[0]
        on_gpu = gpu.networks.encoder(feats, gpu.networks.encoder.init_state("en"))[0]
        torch.testing.assert_close(on_gpu, on_cpu, rtol=1e-3, atol=1e-3)
    out = outputs(gpu)
    if name == "salad":
        np.testing.assert_allclose(out["acoustic"], outputs(cpu)["acoustic"], atol=1e-3)
    else:
        assert isinstance(out["text"], str)
