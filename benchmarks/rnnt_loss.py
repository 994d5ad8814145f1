"""Benchmark of the RNN-T loss: forward + backward time and peak extra memory on CPU.

Run:  python benchmarks/rnnt_loss.py [--repeats N] [--threads N] [--no-joiner]

Table 1 compares, at the four (B, T, U, V) shapes of the task:
  ours      ``speechlab.asr.rnnt.loss.rnnt_loss`` on (B, T, U+1, V) logits;
  fused     ``rnnt_loss_fused`` with the parameter-free joiner ``enc + pred`` (enc (B, T, V),
            pred (B, U+1, V)), i.e. the same logits computed chunk by chunk inside the loss;
  reference a straightforward vectorised PyTorch RNN-T (full log_softmax, gather, per-frame
            recursion with logcumsumexp, autograd backward), written below;
and the torchaudio 2.9 CPU figures measured earlier on this machine.
Memory is what the step adds on top of its inputs (see ``_common``): for ours/reference the
(B, T, U+1, V) logits are inputs and not counted; for fused the logits never exist as a whole,
so everything it needs is counted.

Table 2 (skip with --no-joiner) puts a real joiner ``Linear(D, V)(tanh(enc + pred))`` in
front, where the memory-saving paths matter: materialised logits + ``rnnt_loss`` vs
``rnnt_loss_fused`` vs ``rnnt_loss_pruned`` (s_range 5; simple + pruned losses).  Here the
encoder/predictor outputs are the inputs, so the joiner's activations count for every method.
"""

from __future__ import annotations

import argparse
import math

import torch

from _common import Measurement, format_table, measure

SHAPES = [(8, 150, 30, 64), (8, 150, 30, 500), (16, 300, 50, 128), (4, 500, 80, 1000)]
#: torchaudio 2.9 ``rnnt_loss`` on this machine (given with the task): ms and MB per shape.
TORCHAUDIO_MS = {SHAPES[0]: 108.0, SHAPES[1]: 810.0, SHAPES[2]: 1492.0, SHAPES[3]: 7385.0}
TORCHAUDIO_MB = {SHAPES[0]: 23.0, SHAPES[1]: 143.0, SHAPES[2]: 239.0, SHAPES[3]: 1226.0}
JOINER_SHAPES = [(8, 150, 30, 500), (4, 500, 80, 1000)]
JOINER_DIM = 256
TINY = (2, 8, 6, 16)  # warm-up shape (s_range 5 must fit: U <= 4 T)
SEED = 0


def reference_rnnt_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int = 0,
) -> torch.Tensor:
    """Straightforward RNN-T loss, mean over the batch, backward by autograd.

    Within a frame, alpha_t(u) = log sum_{k<=u} exp(alpha_{t-1}(k) + blank_{t-1}(k)
    + sum_{j=k}^{u-1} label_t(j)); with C_t(u) = sum_{j<u} label_t(j) that is
    C_t(u) + logcumsumexp_k(alpha_{t-1}(k) + blank_{t-1}(k) - C_t(k)): one vectorised step per
    frame over the whole batch.

    Args: logits (B, T, U+1, V); targets (B, U); lengths (B,).
    """
    batch, max_frames, positions, _ = logits.shape
    log_probs = logits.log_softmax(-1)
    blank_lp = log_probs[..., blank]  # (B, T, U+1)
    ids = torch.cat([targets, targets.new_full((batch, 1), blank)], 1).clamp(min=0)
    label_lp = log_probs.gather(3, ids[:, None, :, None].expand(-1, max_frames, -1, 1))[..., 0]
    zero = label_lp.new_zeros(batch, 1)
    alphas = []
    for t in range(max_frames):
        prefix = torch.cat([zero, label_lp[:, t, :-1].cumsum(1)], 1)  # C_t(u)
        if t == 0:
            alpha = prefix
        else:
            came = alphas[-1] + blank_lp[:, t - 1] - prefix
            alpha = prefix + torch.logcumsumexp(came, 1)
        alphas.append(alpha)
    alpha = torch.stack(alphas, 1)  # (B, T, U+1)
    b = torch.arange(batch)
    last_t, last_u = logit_lengths - 1, target_lengths
    log_p = alpha[b, last_t, last_u] + blank_lp[b, last_t, last_u]
    return -log_p.mean()


# ------------------------------------------------------------------------------------------
# Steps measured in child processes (module-level so that spawn can pickle them)


def _inputs(shape, dtype=torch.float32):
    batch, frames, labels, vocab = shape
    gen = torch.Generator().manual_seed(SEED)
    targets = torch.randint(1, vocab, (batch, labels), generator=gen)
    logit_lengths = torch.full((batch,), frames)
    target_lengths = torch.full((batch,), labels)
    return gen, targets, logit_lengths, target_lengths


def _warmed(make, shape, *args):
    """``make(shape, *args)`` after one run of the same step on a tiny problem.

    The tiny run compiles/loads the numba kernels and pages in the library code the step uses,
    so the measured call pays for neither.
    """
    make(TINY, *args)()
    return make(shape, *args)


def _make_step(shape, loss_fn):
    """One forward + backward of ``loss_fn`` on fixed random logits of ``shape``."""
    gen, targets, logit_lengths, target_lengths = _inputs(shape)
    batch, frames, labels, vocab = shape
    logits = torch.randn(batch, frames, labels + 1, vocab, generator=gen, requires_grad=True)

    def step():
        logits.grad = None
        loss_fn(logits, targets, logit_lengths, target_lengths).backward()

    return step


def make_ours(shape):
    from speechlab.asr.rnnt.loss import rnnt_loss

    return _make_step(shape, rnnt_loss)


def make_reference(shape):
    return _make_step(shape, reference_rnnt_loss)


def _add_joiner(enc: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
    return enc + pred


def make_fused_additive(shape):
    from speechlab.asr.rnnt.loss import rnnt_loss_fused

    gen, targets, logit_lengths, target_lengths = _inputs(shape)
    batch, frames, labels, vocab = shape
    enc = torch.randn(batch, frames, vocab, generator=gen, requires_grad=True)
    pred = torch.randn(batch, labels + 1, vocab, generator=gen, requires_grad=True)

    def step():
        enc.grad = pred.grad = None
        rnnt_loss_fused(enc, pred, _add_joiner, targets, logit_lengths, target_lengths).backward()

    return step


def setup_ours(shape):
    return _warmed(make_ours, shape)


def setup_reference(shape):
    return _warmed(make_reference, shape)


def setup_fused_additive(shape):
    return _warmed(make_fused_additive, shape)


class TanhJoiner(torch.nn.Module):
    """``Linear(D, V)(tanh(enc + pred))``, broadcasting its (.., D) inputs."""

    def __init__(self, dim: int, vocab: int):
        super().__init__()
        self.out = torch.nn.Linear(dim, vocab)

    def forward(self, enc: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(enc + pred))


def setup_joiner(shape, method):
    return _warmed(make_joiner, shape, method)


def make_joiner(shape, method):
    from speechlab.asr.rnnt.loss import rnnt_loss, rnnt_loss_fused, rnnt_loss_pruned

    gen, targets, logit_lengths, target_lengths = _inputs(shape)
    batch, frames, labels, vocab = shape
    torch.manual_seed(SEED)
    joiner = TanhJoiner(JOINER_DIM, vocab)
    am_proj = torch.nn.Linear(JOINER_DIM, vocab)
    lm_proj = torch.nn.Linear(JOINER_DIM, vocab)
    enc = torch.randn(batch, frames, JOINER_DIM, generator=gen, requires_grad=True)
    pred = torch.randn(batch, labels + 1, JOINER_DIM, generator=gen, requires_grad=True)
    params = [enc, pred, *joiner.parameters(), *am_proj.parameters(), *lm_proj.parameters()]

    def materialised():
        logits = joiner(enc[:, :, None, :], pred[:, None, :, :])
        return rnnt_loss(logits, targets, logit_lengths, target_lengths)

    def fused():
        return rnnt_loss_fused(enc, pred, joiner, targets, logit_lengths, target_lengths)

    def pruned():
        losses = rnnt_loss_pruned(
            enc, pred, joiner, targets, logit_lengths, target_lengths,
            am=am_proj(enc), lm=lm_proj(pred), s_range=5,
        )
        return 0.5 * losses.simple + losses.pruned

    loss_fn = {"materialised": materialised, "fused": fused, "pruned": pruned}[method]

    def step():
        for p in params:
            p.grad = None
        loss_fn().backward()

    return step


# ------------------------------------------------------------------------------------------


def check_agreement() -> float:
    """Relative difference of ours vs the reference on a small random batch (sanity)."""
    from speechlab.asr.rnnt.loss import rnnt_loss

    shape = (4, 40, 12, 50)
    gen, targets, logit_lengths, target_lengths = _inputs(shape, torch.float64)
    batch, frames, labels, vocab = shape
    logits = torch.randn(batch, frames, labels + 1, vocab, generator=gen, dtype=torch.float64)
    logit_lengths = torch.tensor([40, 33, 21, 5])
    target_lengths = torch.tensor([12, 7, 12, 0])
    ours = rnnt_loss(logits, targets, logit_lengths, target_lengths)
    ref = reference_rnnt_loss(logits, targets, logit_lengths, target_lengths)
    return abs(ours.item() - ref.item()) / abs(ref.item())


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b > 0 and math.isfinite(a / b) else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per measurement")
    parser.add_argument("--threads", type=int, default=2, help="torch/numba threads")
    parser.add_argument("--no-joiner", action="store_true", help="skip table 2")
    args = parser.parse_args()

    print(f"ours vs reference, relative difference of the loss: {check_agreement():.1e}")
    print(
        f"threads={args.threads}, repeats={args.repeats} (reference and table 2: "
        f"{max(1, args.repeats // 2)}); time = median (min) ms of forward + backward; "
        "mem = peak extra live MB of one call, rss = the same with glibc's default "
        "allocator settings (see benchmarks/_common.py)"
    )
    measured: list[Measurement] = []
    rows = []
    for shape in SHAPES:
        results: dict[str, Measurement] = {
            "ours": measure(setup_ours, shape, repeats=args.repeats, threads=args.threads),
            "fused": measure(
                setup_fused_additive, shape, repeats=args.repeats, threads=args.threads
            ),
            "reference": measure(
                setup_reference, shape, repeats=max(1, args.repeats // 2), threads=args.threads
            ),
        }
        measured.extend(results.values())
        ta_ms, ta_mb = TORCHAUDIO_MS[shape], TORCHAUDIO_MB[shape]
        ref = results["reference"]
        for name, m in results.items():
            rows.append([
                str(shape) if name == "ours" else "",
                name,
                f"{m.median_ms:.1f} ({m.min_ms:.1f})",
                m.peak_extra_mb,
                m.rss_default_mb,
                _ratio(ref.median_ms, m.median_ms),
                _ratio(ta_ms, m.median_ms),
                f"{m.peak_extra_mb / ta_mb:.2f}",
            ])
        rows.append(["", "torchaudio 2.9", f"{ta_ms:.0f}", ta_mb, "", "", "1.0x", "1.00"])
    print()
    print("Table 1: loss on given logits (B, T, U, V)")
    print(format_table(
        ["shape", "method", "time ms", "mem MB", "rss MB", "speedup vs ref", "speedup vs TA",
         "mem / TA"],
        rows,
    ))

    if not args.no_joiner:
        rows = []
        for shape in JOINER_SHAPES:
            base = None
            for method in ("materialised", "fused", "pruned"):
                m = measure(
                    setup_joiner, shape, method, repeats=max(1, args.repeats // 2),
                    threads=args.threads,
                )
                measured.append(m)
                base = base or m
                rows.append([
                    str(shape) if method == "materialised" else "",
                    method,
                    f"{m.median_ms:.0f} ({m.min_ms:.0f})",
                    m.peak_extra_mb,
                    m.rss_default_mb,
                    f"{m.median_ms / base.median_ms:.2f}",
                    f"{m.peak_extra_mb / base.peak_extra_mb:.2f}",
                ])
        print()
        print(
            f"Table 2: joiner Linear({JOINER_DIM}, V)(tanh(enc + pred)) + loss, forward + "
            "backward; inputs are the (B, T, D) and (B, U+1, D) joiner inputs"
        )
        print(format_table(
            ["shape", "method", "time ms", "mem MB", "rss MB", "time / materialised",
             "mem / materialised"],
            rows,
        ))
    if not all(m.exact_peak for m in measured):
        print("note: /proc/self/clear_refs not writable; memory is the peak since process start")


if __name__ == "__main__":
    main()
