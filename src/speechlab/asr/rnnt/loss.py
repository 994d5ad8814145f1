"""The RNN-T loss: exact, fast on CPU, and memory-saving variants for large vocabularies.

The multi-softmax paper (Sec. 3) trains every variant (vanilla, onehot, multi-softmax, LID) with
the transducer loss of Graves (2012), "Sequence transduction with recurrent neural networks":
the negative log of the sum over all monotonic alignments of the (T, U+1) lattice, where a blank
advances the frame t, a label advances the label position u, and the blank at (T-1, U)
terminates.  This file holds that loss in three forms:

* :func:`rnnt_loss` takes the joiner's logits ``(B, T, U+1, V)``.  No full log-softmax is
  ever materialised: the forward log-softmaxes one chunk at a time and keeps only the
  ``(B, T, U+1)`` blank and target log-probs; the backward writes ``grad = softmax *
  occupancy - occupancy at blank/target`` straight into one ``(B, T, U+1, V)`` buffer, chunk by
  chunk, so the only full-size allocation is the gradient itself.
* :func:`rnnt_loss_fused` takes encoder and predictor outputs and the joiner.  Logits exist one
  time-chunk at a time, in the forward and again (recomputed) in the backward, so neither the
  logits nor their gradient is ever alive for the whole utterance.  Same value and gradients.
* :func:`rnnt_loss_pruned` is pruned RNN-T (Kuang et al. 2022, "Pruned RNN-T for fast,
  memory-efficient ASR training"): a trivial additive joiner gives a cheap "simple" loss whose
  occupancies choose, per frame, a band of ``s_range`` label positions; the real joiner then runs
  on that band only.  An approximation of the full loss (exact once ``s_range >= U+1``).

The lattice recursion itself (:func:`rnnt_loss_from_log_probs`) runs in numba, float64
(:mod:`speechlab.asr.rnnt._loss_numba`).  CPU parallelism: the work is cut into independent
tasks (logits chunks, utterances) run on ``torch.get_num_threads()`` Python threads, each
single-threaded, instead of torch's OpenMP threads (see :func:`_serial_torch` for why).

Feasibility: RNN-T may emit any number of labels on one frame, so an utterance with fewer frames
than labels is fine.  Only a zero-frame utterance (or lengths outside the padded tensors) has no
alignment; those raise :class:`~speechlab.errors.DataError` naming the batch index, as do targets
equal to the blank or outside the vocabulary.  A loss that still comes out infinite (NaN/inf
logits, or -inf logits on every path) also raises instead of returning NaN.

Padding (frames t >= T_b, label positions u > U_b, targets past U_b) never changes the value and
receives exactly zero gradient; it may hold any number, even NaN -- in the logits, and for the
fused and pruned paths in the encoder/predictor (and ``am``/``lm``) outputs.

Shape legend: B batch, T frames, U target length (U+1 predictor states), V vocabulary,
D model dim, S pruning band (``s_range``).
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Callable, Iterator, NamedTuple

import numpy as np
import torch
from torch.autograd.function import once_differentiable
from torch.utils.checkpoint import checkpoint

from speechlab.asr.rnnt import _loss_cuda, _loss_torch
from speechlab.asr.rnnt._loss_numba import forward_backward
from speechlab.devices import HALF, cuda_kernels_failed, use_cuda_kernels, use_device_code
from speechlab.devices import full_precision as _full
from speechlab.errors import ConfigError, DataError
from speechlab.nn.mask import checked_lengths, lengths_to_mask

Tensor = torch.Tensor
Joiner = Callable[[Tensor, Tensor], Tensor]

#: Per-utterance costs (B,) -> loss.  "mean" averages over utterances, like torchaudio.
REDUCTIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "mean": lambda costs: costs.mean(),
    "sum": lambda costs: costs.sum(),
    "none": lambda costs: costs,
}

#: Logits elements log-softmaxed at once (4 MB in float32): the size of the only temporary.
#: On the 2-core dev machine the speed is flat from 256K elements up; below that the per-op
#: overhead shows.
DEFAULT_CHUNK_ELEMENTS = 1 << 20

#: Logits elements per joiner call in :func:`rnnt_loss_fused` (16 MB in float32).  Bigger
#: chunks amortise the joiner's matmuls and peak memory grows with a few times this; past
#: glibc's 32 MB mmap threshold every chunk is page-faulted afresh (measured 2.5x slower).
DEFAULT_FUSED_CHUNK_ELEMENTS = 1 << 22


# --------------------------------------------------------------------------------------------
# Input checks


def _reduction(name: str) -> Callable[[Tensor], Tensor]:
    try:
        return REDUCTIONS[name]
    except KeyError:
        raise ConfigError(
            f"rnnt loss: unknown reduction {name!r}; choose one of {sorted(REDUCTIONS)}"
        ) from None


def _check_target_shape(targets: Tensor, batch: int, positions: int) -> None:
    if targets.dim() != 2 or targets.shape[0] != batch or targets.shape[1] + 1 != positions:
        raise DataError(
            f"rnnt loss: targets must be (B, U) = ({batch}, {positions - 1}) to match the "
            f"U+1 = {positions} predictor states, got shape {tuple(targets.shape)}"
        )
    if targets.is_floating_point() or targets.is_complex():
        raise DataError(f"rnnt loss: targets must hold integer ids, got dtype {targets.dtype}")


def _check_lengths(
    batch: int,
    max_frames: int,
    max_labels: int,
    logit_lengths: Tensor,
    target_lengths: Tensor,
) -> tuple[np.ndarray, np.ndarray]:
    """Lengths against the padded shapes; returns (frames, labels), int64 numpy (B,)."""
    frames = checked_lengths(
        logit_lengths, batch, 1, max_frames, owner="rnnt loss", name="logit_lengths",
        item="batch index", span="T of the padded input",
        hint="; an utterance with no frames has no alignment, drop it before the loss",
    )
    labels = checked_lengths(
        target_lengths, batch, 0, max_labels, owner="rnnt loss", name="target_lengths",
        item="batch index", span="U of the padded targets",
    )
    if batch == 0:
        raise DataError("rnnt loss: empty batch (B = 0)")
    return frames, labels


def _check_targets(targets: Tensor, labels: np.ndarray, vocab: int, blank: int) -> None:
    if not 0 <= blank < vocab:
        raise ConfigError(f"rnnt loss: blank id {blank} is outside the vocabulary 0..{vocab - 1}")
    ids = targets.detach().cpu().to(torch.int64).numpy()
    inside = np.arange(ids.shape[1])[None, :] < labels[:, None]
    bad = np.argwhere(inside & ((ids < 0) | (ids >= vocab) | (ids == blank)))
    if bad.size:
        b, u = (int(i) for i in bad[0])
        why = "the blank id" if ids[b, u] == blank else f"outside the vocabulary 0..{vocab - 1}"
        raise DataError(
            f"rnnt loss: batch index {b}: targets[{b}, {u}] = {ids[b, u]} is {why}; "
            "fix the tokenizer output or the blank id"
        )


def _label_ids(targets: Tensor, labels: np.ndarray, blank: int, positions: int) -> Tensor:
    """(B, U+1) int64 id of the label leaving each position; blank where there is none.

    Padding ids (which may be -1 or anything) are replaced so that gathers stay in range.
    """
    batch, max_labels = targets.shape
    ids = torch.full((batch, positions), blank, dtype=torch.int64, device=targets.device)
    inside = lengths_to_mask(torch.as_tensor(labels), max_labels, device=targets.device)
    ids[:, :max_labels] = torch.where(inside, targets.to(torch.int64), blank)
    return ids


def _check_float(name: str, x: Tensor, dims: int) -> None:
    if x.dim() != dims:
        raise DataError(f"rnnt loss: {name} must have {dims} dims, got shape {tuple(x.shape)}")
    if x.dtype not in (torch.float32, torch.float64, *HALF):
        raise DataError(
            f"rnnt loss: {name} must be a float tensor (float32 or float64; half precision is "
            f"upcast to float32), got {x.dtype}"
        )


# --------------------------------------------------------------------------------------------
# Threads


@contextlib.contextmanager
def _serial_torch() -> Iterator[int]:
    """Run torch ops of the calling thread on one core; yields the caller's thread count.

    Why: torch's intra-op (OpenMP) parallelism ends every op in a barrier that waits for all
    its threads, and on a shared machine a descheduled thread stalls each barrier for a time
    slice -- measured 5-20x slower on the 2-core dev box while others ran jobs.  The loss
    instead splits its work into independent tasks for :func:`_in_threads`, and its small
    bookkeeping ops run serially.  Only the loss's own ops are affected: the joiner of
    :func:`rnnt_loss_fused` runs outside this context.
    """
    caller_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield caller_threads
    finally:
        # set_num_threads also sets torch's default for threads created meanwhile; restore it.
        torch.set_num_threads(caller_threads)


def _single_threaded_worker() -> None:
    torch.set_num_threads(1)


def _in_threads(tasks: list[Callable[[], None]], n_threads: int) -> None:
    """Run independent tasks on up to ``n_threads`` Python threads, one core each.

    Each worker takes the next task when it is free, so a core that is busy with someone
    else's job only delays its own share.  Torch ops and the numba kernel release the GIL.
    Tasks run without autograd recording, and in the caller's inference mode (both are per
    thread; tensors made under ``torch.inference_mode`` can only be written inside it).
    """
    n_threads = min(n_threads, len(tasks))
    inference = torch.is_inference_mode_enabled()

    def run(task: Callable[[], None]) -> None:
        with torch.inference_mode(inference), torch.no_grad():
            task()

    if n_threads <= 1:
        for task in tasks:
            run(task)
        return
    with ThreadPoolExecutor(n_threads, initializer=_single_threaded_worker) as pool:
        for future in [pool.submit(run, task) for task in tasks]:
            future.result()  # re-raises a task's exception here


# --------------------------------------------------------------------------------------------
# Logits -> (blank, label) log-probs without keeping a log-softmax


class _LatticeLogProbs(torch.autograd.Function):
    """(B, T, U+1, V) logits -> blank and label log-probs, each (B, T, U+1).

    Forward runs log-softmax one chunk at a time and keeps only the two gathered columns, plus
    a reference to the logits (the caller's tensor, no copy).  Backward recomputes the softmax
    chunk by chunk straight into the one gradient buffer:
    d/dx_k = g_blank [k = blank] + g_label [k = y_{u+1}] - (g_blank + g_label) softmax_k.
    (torch's fused softmax/log_softmax kernels are twice as fast as logsumexp on this CPU, so
    recomputing beats storing a normaliser.)  ``known`` short-cuts the forward with outputs
    computed before, for the recomputation in :func:`rnnt_loss_fused`.
    Cells outside each utterance's (T_b, U_b+1) region are 0 and get zero gradient.
    """

    @staticmethod
    def forward(ctx, logits, label_ids, frames, labels, blank, chunk_elements, known):
        batch, max_frames, positions, vocab = logits.shape
        ctx.save_for_backward(logits, label_ids)
        ctx.meta = (frames, labels, blank, chunk_elements)
        if known is not None:
            return known[0].clone(), known[1].clone()
        x = logits.detach()
        if use_device_code(x):
            return _log_probs_device(x, label_ids, blank, chunk_elements)
        with _serial_torch() as n_threads:
            blank_lp = x.new_zeros((batch, max_frames, positions))
            label_lp = x.new_zeros((batch, max_frames, positions))
            _in_threads(
                [partial(_log_probs_chunk, x, label_ids, blank, blank_lp, label_lp, *c)
                 for c in _chunks(frames, labels, vocab, chunk_elements)],
                n_threads,
            )
        return blank_lp, label_lp

    @staticmethod
    @once_differentiable  # second derivatives are not implemented: fail loudly
    def backward(ctx, g_blank, g_label):
        logits, label_ids = ctx.saved_tensors
        frames, labels, blank, chunk_elements = ctx.meta
        x = logits.detach()
        zero = torch.zeros((), dtype=x.dtype, device=x.device)
        g_blank, g_label = torch.broadcast_tensors(
            zero if g_blank is None else g_blank, zero if g_label is None else g_label
        )
        if use_device_code(x):
            grad = _grad_device(x, label_ids, blank, g_blank, g_label, frames, labels,
                                chunk_elements)
            return grad, None, None, None, None, None, None
        with _serial_torch() as n_threads:
            grad = torch.empty(x.shape, dtype=x.dtype, device=x.device)
            chunks = _chunks(frames, labels, x.shape[-1], chunk_elements)
            _in_threads(
                [partial(_zero_padding, grad, frames, labels, b) for b in range(len(frames))]
                + [partial(_grad_chunk, x, label_ids, blank, g_blank, g_label, grad, *c)
                   for c in chunks],
                n_threads,
            )
        return grad, None, None, None, None, None, None


#: Logits elements per step of the device path (256 MB in float32): a GPU wants few, large
#: kernels, and the whole batch goes at once (padding included, masked by the lattice).
DEVICE_CHUNK_ELEMENTS = 1 << 26


def _time_steps(x: Tensor, chunk_elements: int) -> list[tuple[int, int]]:
    batch, max_frames, positions, vocab = x.shape
    step = max(1, max(chunk_elements, DEVICE_CHUNK_ELEMENTS) // (batch * positions * vocab))
    return [(t0, min(t0 + step, max_frames)) for t0 in range(0, max_frames, step)]


def _log_probs_device(x: Tensor, label_ids: Tensor, blank: int,
                      chunk_elements: int) -> tuple[Tensor, Tensor]:
    """The forward of :class:`_LatticeLogProbs` where the logits are (a GPU): whole-batch
    time slices, no threads, nothing copied to the host."""
    batch, max_frames, positions, _ = x.shape
    blank_lp = x.new_zeros((batch, max_frames, positions))
    label_lp = x.new_zeros((batch, max_frames, positions))
    for t0, t1 in _time_steps(x, chunk_elements):
        log_probs = torch.log_softmax(x[:, t0:t1], dim=-1)
        blank_lp[:, t0:t1] = log_probs[..., blank]
        index = label_ids[:, None, :, None].expand(-1, t1 - t0, -1, 1)
        label_lp[:, t0:t1] = log_probs.gather(3, index).squeeze(3)
    return blank_lp, label_lp


def _grad_device(x: Tensor, label_ids: Tensor, blank: int, g_blank: Tensor, g_label: Tensor,
                 frames: np.ndarray, labels: np.ndarray, chunk_elements: int) -> Tensor:
    """The backward of :class:`_LatticeLogProbs` on the device path; exactly zero on padding
    (which may hold NaN, so it is selected away, not multiplied by zero)."""
    batch, max_frames, positions, _ = x.shape
    device = x.device
    t_ok = lengths_to_mask(torch.as_tensor(frames), max_frames, device=device)
    u_ok = lengths_to_mask(torch.as_tensor(labels), positions, inclusive=True, device=device)
    valid = t_ok[:, :, None] & u_ok[:, None, :]  # (B, T, U+1)
    grad = torch.empty_like(x)
    for t0, t1 in _time_steps(x, chunk_elements):
        out = torch.softmax(x[:, t0:t1], dim=-1)
        g_b, g_l = g_blank[:, t0:t1], g_label[:, t0:t1]
        out.mul_((g_b + g_l).neg()[..., None])
        out[..., blank] += g_b
        index = label_ids[:, None, :, None].expand(-1, t1 - t0, -1, 1)
        out.scatter_add_(3, index, g_l[..., None])
        grad[:, t0:t1] = torch.where(valid[:, t0:t1, :, None], out, 0.0)
    return grad


def _log_probs_chunk(x, label_ids, blank, blank_lp, label_lp, b, t0, t1, cols) -> None:
    """Forward of one block: log-softmax, keep the blank and target columns."""
    log_probs = torch.log_softmax(x[b, t0:t1, :cols], dim=-1)
    blank_lp[b, t0:t1, :cols] = log_probs[..., blank]
    index = label_ids[b, None, :cols, None].expand(t1 - t0, cols, 1)
    label_lp[b, t0:t1, :cols] = log_probs.gather(2, index).squeeze(2)


def _grad_chunk(x, label_ids, blank, g_blank, g_label, grad, b, t0, t1, cols) -> None:
    """Backward of one block, written in place into ``grad``."""
    out = grad[b, t0:t1, :cols]
    torch.softmax(x[b, t0:t1, :cols], dim=-1, out=out)
    g_b, g_l = g_blank[b, t0:t1, :cols], g_label[b, t0:t1, :cols]
    out.mul_((g_b + g_l).neg_()[..., None])
    out[..., blank] += g_b
    index = label_ids[b, None, :cols, None].expand(t1 - t0, cols, 1)
    out.scatter_add_(2, index, g_l[..., None])


def _zero_padding(grad: Tensor, frames: np.ndarray, labels: np.ndarray, b: int) -> None:
    rows, cols = int(frames[b]), int(labels[b]) + 1
    grad[b, rows:].zero_()
    grad[b, :rows, cols:].zero_()


def _chunks(
    frames: np.ndarray, labels: np.ndarray, vocab: int, chunk_elements: int
) -> list[tuple[int, int, int, int]]:
    """(b, t0, t1, valid positions) blocks of about ``chunk_elements`` valid logits each."""
    blocks = []
    for b in range(len(frames)):
        rows, cols = int(frames[b]), int(labels[b]) + 1
        step = max(1, chunk_elements // (cols * vocab))
        blocks += [(b, t0, min(t0 + step, rows), cols) for t0 in range(0, rows, step)]
    return blocks


# --------------------------------------------------------------------------------------------
# The lattice recursion


def _lattice(
    blank64: np.ndarray,
    label64: np.ndarray,
    frames: np.ndarray,
    labels: np.ndarray,
    need: bool,
    n_threads: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run the numba kernel, one utterance per task (:func:`_in_threads`), longest first.

    Returns cost (B,) and, if ``need``, occupancies (B, T, U+1) (else empty arrays).
    """
    batch = len(frames)
    cost = np.empty(batch)
    occ_shape = blank64.shape if need else (0, 0, 0)
    occ_blank, occ_label = np.zeros(occ_shape), np.zeros(occ_shape)

    def utterance(b: int) -> None:
        forward_backward(
            blank64, label64, frames, labels, np.array([b]), need, cost, occ_blank, occ_label
        )

    longest_first = np.argsort(-frames * (labels + 1), kind="stable")
    _in_threads([partial(utterance, int(b)) for b in longest_first], n_threads)
    return cost, occ_blank, occ_label


def _device_lattice(blank_lp: Tensor, label_lp: Tensor, frames: Tensor, labels: Tensor,
                    need_occupancy: bool) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """The device path's lattice: CUDA kernels on an NVIDIA GPU where numba can build them
    (:mod:`._loss_cuda`), else the recursion in PyTorch ops (:mod:`._loss_torch`)."""
    if use_cuda_kernels(blank_lp):
        try:
            return _loss_cuda.lattice(blank_lp, label_lp, frames, labels, need_occupancy)
        except Exception as e:  # built or launched nowhere: numba's own errors, of many kinds
            cuda_kernels_failed(e)
    return _loss_torch.lattice(blank_lp, label_lp, frames, labels, need_occupancy)


class _TransducerLattice(torch.autograd.Function):
    """(B, T, U+1) blank and label log-probs -> (B,) negative log-likelihoods."""

    @staticmethod
    def forward(ctx, blank_lp, label_lp, frames, labels):
        need_grad = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        ctx.dtype, ctx.device = blank_lp.dtype, blank_lp.device
        if use_device_code(blank_lp):
            # Where the log-probs are (a GPU): nothing leaves it.
            cost_t, occ_b, occ_l = _device_lattice(
                blank_lp.detach(), label_lp.detach(), _on(frames, blank_lp),
                _on(labels, blank_lp), need_grad)
            finite = torch.isfinite(cost_t)
            if not bool(finite.all()):
                _raise_infinite(int((~finite).nonzero()[0, 0]), float(cost_t[~finite][0]))
            ctx.occupancies = (occ_b, occ_l)
            return cost_t.to(blank_lp.dtype)
        with _serial_torch() as n_threads:
            blank64, label64 = _as_float64(blank_lp), _as_float64(label_lp)
            cost, occ_blank, occ_label = _lattice(
                blank64, label64, frames, labels, need_grad, n_threads
            )
        bad = np.flatnonzero(~np.isfinite(cost))
        if bad.size:
            _raise_infinite(int(bad[0]), float(cost[int(bad[0])]))
        ctx.occupancies = (occ_blank, occ_label)
        return torch.from_numpy(cost.astype(_NUMPY_DTYPE[blank_lp.dtype])).to(blank_lp.device)

    @staticmethod
    @once_differentiable  # second derivatives are not implemented: fail loudly
    def backward(ctx, g_cost):
        if isinstance(ctx.occupancies[0], torch.Tensor):  # the device path's
            scale = -g_cost.detach().double()[:, None, None]
            return (*((occ * scale).to(ctx.dtype) for occ in ctx.occupancies), None, None)
        # numpy, not torch: these (B, T, U+1) products are too small to be worth OpenMP.
        scale = -g_cost.detach().cpu().double().numpy()[:, None, None]
        dtype = _NUMPY_DTYPE[ctx.dtype]
        return (
            *(torch.from_numpy((occ * scale).astype(dtype)).to(ctx.device)
              for occ in ctx.occupancies),
            None,
            None,
        )


_NUMPY_DTYPE = {torch.float32: np.float32, torch.float64: np.float64}


def _raise_infinite(b: int, cost: float) -> None:
    raise DataError(
        f"rnnt loss: batch index {b}: no alignment has non-zero probability "
        f"(cost {cost}); the logits hold NaN/inf or -inf on every path"
    )


def _on(lengths: np.ndarray, like: Tensor) -> Tensor:
    """(B,) int64 numpy lengths as a tensor on ``like``'s device."""
    return torch.as_tensor(lengths, dtype=torch.int64).to(like.device)


def _as_float64(x: Tensor) -> np.ndarray:
    """(B, T, U+1) tensor -> contiguous float64 numpy array (converted by numpy, serially)."""
    return np.ascontiguousarray(x.detach().cpu().numpy(), dtype=np.float64)


def rnnt_loss_from_log_probs(
    blank_lp: Tensor,
    label_lp: Tensor,
    logit_lengths: Tensor,
    target_lengths: Tensor,
    reduction: str = "mean",
) -> Tensor:
    """RNN-T loss from already-normalised transition log-probs.

    For joiners whose normalisation is not a plain softmax over V (e.g. pruned lattices, or a
    softmax restricted to one language's symbols in the multi-softmax model).

    Args:
        blank_lp: (B, T, U+1) log P(blank | t, u).
        label_lp: (B, T, U+1) log P(y_{u+1} | t, u); column U_b is never read.
            Either may hold -inf for forbidden transitions.
        logit_lengths: (B,) valid frames T_b, 1 <= T_b <= T.
        target_lengths: (B,) valid labels U_b, 0 <= U_b <= U.
        reduction: "mean" over the batch, "sum", or "none" for per-utterance (B,) costs.

    Returns:
        The reduced negative log-likelihood; gradients are the (negated) transition
        occupancies, exact, zero on padding.
    """
    reduce = _reduction(reduction)
    _check_float("blank_lp", blank_lp, 3)
    _check_float("label_lp", label_lp, 3)
    blank_lp, label_lp = _full(blank_lp), _full(label_lp)
    if label_lp.shape != blank_lp.shape:
        raise DataError(
            f"rnnt loss: blank_lp {tuple(blank_lp.shape)} and label_lp "
            f"{tuple(label_lp.shape)} must have the same (B, T, U+1) shape"
        )
    batch, max_frames, positions = blank_lp.shape
    frames, labels = _check_lengths(
        batch, max_frames, positions - 1, logit_lengths, target_lengths
    )
    return reduce(_TransducerLattice.apply(blank_lp, label_lp, frames, labels))


# --------------------------------------------------------------------------------------------
# Public losses


def rnnt_loss(
    logits: Tensor,
    targets: Tensor,
    logit_lengths: Tensor,
    target_lengths: Tensor,
    blank: int = 0,
    reduction: str = "mean",
    *,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
) -> Tensor:
    """Graves' RNN-T negative log-likelihood, exact forward-backward, analytic gradient.

    Args:
        logits: (B, T, U+1, V) unnormalised joiner outputs, float32 or float64; log-softmax over
            V is applied inside (without materialising it).
        targets: (B, U) int label ids, padded past ``target_lengths`` with anything.
        logit_lengths: (B,) int valid frames T_b, 1 <= T_b <= T.
        target_lengths: (B,) int valid labels U_b, 0 <= U_b <= U.
        blank: blank id in 0..V-1; targets must not contain it.
        reduction: "mean" over the batch, "sum", or "none" for (B,) per-utterance costs.
        chunk_elements: logits elements per vectorised step (speed knob only).

    Returns:
        Scalar (or (B,) for "none") in the dtype of ``logits``.

    Raises:
        DataError: naming the batch index, for zero-frame utterances, lengths beyond the padded
            shapes, targets equal to blank or outside the vocabulary, or an infinite cost.
    """
    reduce = _reduction(reduction)
    _check_float("logits", logits, 4)
    logits = _full(logits)
    batch, max_frames, positions, vocab = logits.shape
    _check_target_shape(targets, batch, positions)
    frames, labels = _check_lengths(
        batch, max_frames, positions - 1, logit_lengths, target_lengths
    )
    _check_targets(targets, labels, vocab, blank)
    label_ids = _label_ids(targets, labels, blank, positions).to(logits.device)
    blank_lp, label_lp = _LatticeLogProbs.apply(
        logits, label_ids, frames, labels, blank, chunk_elements, None
    )
    return reduce(_TransducerLattice.apply(blank_lp, label_lp, frames, labels))


def rnnt_loss_fused(
    encoder_out: Tensor,
    predictor_out: Tensor,
    joiner: Joiner,
    targets: Tensor,
    logit_lengths: Tensor,
    target_lengths: Tensor,
    blank: int = 0,
    reduction: str = "mean",
    *,
    chunk_elements: int = DEFAULT_FUSED_CHUNK_ELEMENTS,
) -> Tensor:
    """:func:`rnnt_loss` of ``joiner(encoder_out, predictor_out)`` without the full logits.

    The joiner runs on a few frames at a time; each chunk's logits are reduced to blank and
    label log-probs at once and dropped, then recomputed chunk by chunk in the backward
    (activation checkpointing), so peak memory is a few chunks, not (B, T, U+1, V).  Costs one
    extra joiner forward.  Values and gradients equal :func:`rnnt_loss` on the full logits.

    Args:
        encoder_out: (B, T, D) encoder output (its grad is produced).
        predictor_out: (B, U+1, D) predictor output (its grad is produced).
        joiner: ``joiner(enc (B, t, 1, D), pred (B, 1, U+1, D)) -> (B, t, U+1, V)`` logits;
            it must broadcast its two inputs (e.g. ``linear(tanh(enc + pred))``).  Parameters it
            closes over get their gradients too.  Randomness (dropout) is replayed exactly.
        targets, logit_lengths, target_lengths, blank, reduction: as in :func:`rnnt_loss`.
        chunk_elements: logits elements per joiner call; the memory/speed knob.
    """
    reduce = _reduction(reduction)
    _check_float("encoder_out", encoder_out, 3)
    _check_float("predictor_out", predictor_out, 3)
    batch, max_frames, _ = encoder_out.shape
    positions = predictor_out.shape[1]
    if predictor_out.shape[0] != batch:
        raise DataError(
            f"rnnt loss: predictor_out {tuple(predictor_out.shape)} and encoder_out "
            f"{tuple(encoder_out.shape)} disagree on the batch size"
        )
    _check_target_shape(targets, batch, positions)
    frames, labels = _check_lengths(
        batch, max_frames, positions - 1, logit_lengths, target_lengths
    )
    encoder_out, predictor_out = _zero_padding_rows(encoder_out, predictor_out, frames, labels)
    vocab = _joiner_vocab(joiner, encoder_out, predictor_out)
    _check_targets(targets, labels, vocab, blank)
    label_ids = _label_ids(targets, labels, blank, positions).to(encoder_out.device)

    # The backward recomputes each chunk's logits (checkpointing replays the RNG, so they are
    # the same logits) only for their gradient; the chunk's log-probs are kept from the forward
    # (they are small) instead of being recomputed with them.
    computed: dict[int, tuple[Tensor, Tensor]] = {}

    def chunk_log_probs(enc: Tensor, pred: Tensor, t0: int) -> tuple[Tensor, Tensor]:
        logits = joiner(enc[:, :, None, :], pred[:, None, :, :])
        _check_joiner_output(logits, (batch, enc.shape[1], positions, vocab))
        logits = _full(logits)
        chunk_frames = np.clip(frames - t0, 0, enc.shape[1])
        blank_lp, label_lp = _LatticeLogProbs.apply(
            logits, label_ids, chunk_frames, labels, blank, DEFAULT_CHUNK_ELEMENTS,
            computed.get(t0),
        )
        computed.setdefault(t0, (blank_lp.detach(), label_lp.detach()))
        return blank_lp, label_lp

    step = max(1, chunk_elements // (batch * positions * vocab))
    blank_parts, label_parts = [], []
    for t0 in range(0, max_frames, step):
        blank_lp, label_lp = checkpoint(
            chunk_log_probs,
            encoder_out[:, t0 : t0 + step],
            predictor_out,
            t0,
            use_reentrant=False,
        )
        blank_parts.append(blank_lp)
        label_parts.append(label_lp)
    costs = _TransducerLattice.apply(
        torch.cat(blank_parts, 1), torch.cat(label_parts, 1), frames, labels
    )
    return reduce(costs)


def _zero_padding_rows(
    frame_rows: Tensor, label_rows: Tensor, frames: np.ndarray, labels: np.ndarray
) -> tuple[Tensor, Tensor]:
    """Zero the padded frames of (B, T, .) and label positions of (B, U+1, .) inputs.

    The loss's own gradient is zero on padding, but a joiner's backward multiplies that zero by
    derivatives taken at the padded values: 0 * NaN would still poison the parameters.  After
    this, padding may hold anything (and receives exactly zero gradient through ``where``).
    """
    device = frame_rows.device
    t_ok = lengths_to_mask(torch.as_tensor(frames), frame_rows.shape[1], device=device)
    u_ok = lengths_to_mask(torch.as_tensor(labels), label_rows.shape[1], inclusive=True,
                           device=device)
    return (
        torch.where(t_ok[..., None], frame_rows, 0.0),
        torch.where(u_ok[..., None], label_rows, 0.0),
    )


def _joiner_vocab(joiner: Joiner, encoder_out: Tensor, predictor_out: Tensor) -> int:
    """V from one joiner cell, without touching autograd or the RNG state (dropout)."""
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        logits = joiner(encoder_out[:1, :1, None, :], predictor_out[:1, None, :1, :])
    if logits.dim() != 4:
        raise DataError(
            f"rnnt loss: the joiner returned shape {tuple(logits.shape)} for one (1, 1, 1, D) "
            "cell, expected (1, 1, 1, V)"
        )
    return logits.shape[-1]


def _check_joiner_output(logits: Tensor, expected: tuple[int, ...]) -> None:
    if tuple(logits.shape) != expected:
        raise DataError(
            f"rnnt loss: the joiner returned shape {tuple(logits.shape)}, expected {expected}; "
            "it must broadcast its encoder and predictor inputs"
        )
    _check_float("joiner output", logits, 4)


# --------------------------------------------------------------------------------------------
# Pruned RNN-T


class PrunedLoss(NamedTuple):
    """The two losses of pruned RNN-T; train on ``simple_scale * simple + pruned``."""

    simple: Tensor  #: loss of the trivial additive joiner (trains ``am``/``lm``)
    pruned: Tensor  #: loss of the real joiner on the pruned band


def simple_log_probs(
    am: Tensor, lm: Tensor, label_ids: Tensor, blank: int
) -> tuple[Tensor, Tensor]:
    """Blank and label log-probs of the trivial joiner ``logits(t, u) = am(t) + lm(u)``.

    The normaliser log sum_v exp(am[t, v] + lm[u, v]) is one (T, V) x (V, U+1) matmul of
    max-shifted exponentials (float64, so spreads of hundreds of nats do not underflow), never a
    (B, T, U+1, V) tensor.

    Args:
        am: (B, T, V) encoder projected to the vocabulary.
        lm: (B, U+1, V) predictor projected to the vocabulary.
        label_ids: (B, U+1) id of the label leaving each position (blank where none).
    Returns:
        blank_lp, label_lp: (B, T, U+1) each, in ``am``'s dtype.
    """
    am_max = am.detach().amax(-1, keepdim=True)
    lm_max = lm.detach().amax(-1, keepdim=True)
    sums = torch.matmul(
        (am - am_max).double().exp(), (lm - lm_max).double().exp().transpose(1, 2)
    )
    norm = sums.log().to(am.dtype) + am_max + lm_max.transpose(1, 2)
    batch, max_frames, _ = am.shape
    positions = lm.shape[1]
    blank_lp = am[..., blank, None] + lm[..., blank][:, None, :] - norm
    am_label = am.gather(2, label_ids[:, None, :].expand(batch, max_frames, positions))
    lm_label = lm.gather(2, label_ids[:, :, None]).squeeze(2)
    return blank_lp, am_label + lm_label[:, None, :] - norm


def prune_ranges(
    occupancy: Tensor, frames: np.ndarray, labels: np.ndarray, s_range: int
) -> Tensor:
    """First label position of each frame's band of ``s_range`` positions.

    Per frame, the band with the most occupancy (posterior mass of passing through its
    nodes), then made consistent so that at least one full alignment stays inside the bands:
    start 0 at t = 0, reach U_b at t = T_b - 1, non-decreasing, and consecutive bands overlap
    (each start at most ``s_range - 1`` beyond the previous one).

    Args:
        occupancy: (B, T, U+1) node occupancy from the simple loss.
        frames, labels: (B,) T_b and U_b.
        s_range: band width S, 2 <= S <= U+1.
    Returns:
        (B, T) int64 starts in 0..U+1-S.
    """
    batch, max_frames, positions = occupancy.shape
    width = s_range
    csum = torch.nn.functional.pad(occupancy.cumsum(-1), (1, 0))
    proposal = (csum[..., width:] - csum[..., :-width]).argmax(-1)  # (B, T)
    device = occupancy.device
    t = torch.arange(max_frames, device=device)[None, :]
    top = torch.as_tensor(np.maximum(labels + 1 - width, 0)).to(device)[:, None]  # holds U_b
    n_t = torch.as_tensor(frames).to(device)[:, None]
    step = width - 1
    lowest = (top - step * (n_t - 1 - t)).clamp(min=0)  # still able to climb to U_b
    highest = torch.minimum(top, step * t)  # reachable from 0 at t = 0
    starts = torch.minimum(torch.maximum(proposal, lowest), highest)
    starts = torch.cummax(starts, dim=1).values
    # s_t <= s_k + step * (t - k) for all k <= t: consecutive bands overlap.
    starts = torch.minimum(starts, step * t + torch.cummin(starts - step * t, dim=1).values)
    return starts


def rnnt_loss_pruned(
    encoder_out: Tensor,
    predictor_out: Tensor,
    joiner: Joiner,
    targets: Tensor,
    logit_lengths: Tensor,
    target_lengths: Tensor,
    *,
    am: Tensor,
    lm: Tensor,
    s_range: int = 5,
    blank: int = 0,
    reduction: str = "mean",
) -> PrunedLoss:
    """Pruned RNN-T (Kuang et al. 2022): simple loss, pruning bounds, joiner on a band.

    1. The trivial joiner ``am(t) + lm(u)`` gives the simple loss and its occupancies.
    2. :func:`prune_ranges` picks ``s_range`` label positions per frame.
    3. The real joiner runs on (B, T, S) cells only; the lattice treats every cell outside the
       band as impossible (-inf), so the pruned loss is >= the full loss and equals it once the
       band covers all U+1 positions.

    Args:
        encoder_out: (B, T, D) encoder output.
        predictor_out: (B, U+1, D) predictor output.
        joiner: ``joiner(enc (B, T, 1, D), pred (B, T, S, D)) -> (B, T, S, V)`` (broadcasting).
        targets, logit_lengths, target_lengths, blank, reduction: as in :func:`rnnt_loss`.
        am: (B, T, V) encoder projected to V (the simple joiner's acoustic half).
        lm: (B, U+1, V) predictor projected to V (its language-model half).
        s_range: band width S >= 2; each frame may then emit up to S-1 labels.

    Raises:
        DataError: as :func:`rnnt_loss`, and when an utterance has more than ``(S-1) * T_b``
            labels (no alignment fits in the bands; the message says which S would).
    """
    reduce = _reduction(reduction)
    if s_range < 2:
        raise ConfigError(f"rnnt loss: s_range must be >= 2 (got {s_range})")
    for name, x in (("encoder_out", encoder_out), ("predictor_out", predictor_out)):
        _check_float(name, x, 3)
    _check_float("am", am, 3)
    _check_float("lm", lm, 3)
    am, lm = _full(am), _full(lm)
    batch, max_frames, _ = encoder_out.shape
    positions, vocab = lm.shape[1], lm.shape[2]
    if (
        predictor_out.shape[:2] != (batch, positions)
        or am.shape != (batch, max_frames, vocab)
        or lm.shape[0] != batch
    ):
        raise DataError(
            "rnnt loss: expected encoder_out (B, T, D), predictor_out (B, U+1, D), "
            f"am (B, T, V), lm (B, U+1, V); got {tuple(encoder_out.shape)}, "
            f"{tuple(predictor_out.shape)}, {tuple(am.shape)}, {tuple(lm.shape)}"
        )
    _check_target_shape(targets, batch, positions)
    frames, labels = _check_lengths(
        batch, max_frames, positions - 1, logit_lengths, target_lengths
    )
    _check_targets(targets, labels, vocab, blank)
    width = min(s_range, positions)
    over = np.flatnonzero(labels > (width - 1) * frames)
    if over.size:
        b = int(over[0])
        need = -(-int(labels[b]) // int(frames[b])) + 1
        raise DataError(
            f"rnnt loss: batch index {b}: {labels[b]} labels in {frames[b]} frames do not fit "
            f"bands of s_range={s_range} (at most {width - 1} labels per frame); use "
            f"s_range >= {need} or the unpruned loss"
        )
    device = encoder_out.device
    label_ids = _label_ids(targets, labels, blank, positions).to(device)
    encoder_out, predictor_out = _zero_padding_rows(encoder_out, predictor_out, frames, labels)
    am, lm = _zero_padding_rows(am, lm, frames, labels)

    simple_blank, simple_label = simple_log_probs(am, lm, label_ids, blank)
    simple_costs = _TransducerLattice.apply(simple_blank, simple_label, frames, labels)

    occupancy = _node_occupancy(simple_blank.detach(), simple_label.detach(), frames, labels)
    starts = prune_ranges(occupancy, frames, labels, width).to(device)  # (B, T)
    u_index = starts[:, :, None] + torch.arange(width, device=device)  # (B, T, S)

    dim = predictor_out.shape[2]
    pred_band = predictor_out.gather(
        1, u_index.reshape(batch, -1, 1).expand(-1, -1, dim)
    ).reshape(batch, max_frames, width, dim)
    logits = joiner(encoder_out[:, :, None, :], pred_band)
    _check_joiner_output(logits, (batch, max_frames, width, vocab))
    log_probs = _full(logits).log_softmax(-1)
    band_labels = label_ids.gather(1, u_index.reshape(batch, -1)).reshape(batch, max_frames, width)
    frames_t = torch.as_tensor(frames).to(device)[:, None, None]
    labels_t = torch.as_tensor(labels).to(device)[:, None, None]
    valid = (torch.arange(max_frames, device=device)[None, :, None] < frames_t) & (
        u_index <= labels_t
    )
    blank_band = torch.where(valid, log_probs[..., blank], 0.0)
    label_band = torch.where(valid, log_probs.gather(3, band_labels[..., None]).squeeze(3), 0.0)
    # Cells outside the band are impossible: paths leaving it die there.
    outside = logits.new_full((batch, max_frames, positions), float("-inf"))
    blank_lp = outside.scatter(2, u_index, blank_band)
    label_lp = outside.scatter(2, u_index, label_band)
    pruned_costs = _TransducerLattice.apply(blank_lp, label_lp, frames, labels)
    return PrunedLoss(reduce(simple_costs), reduce(pruned_costs))


def _node_occupancy(
    blank_lp: Tensor, label_lp: Tensor, frames: np.ndarray, labels: np.ndarray
) -> Tensor:
    """(B, T, U+1) float64 posterior probability of passing through each lattice node."""
    if use_device_code(blank_lp):
        _, occ_b, occ_l = _device_lattice(blank_lp, label_lp, _on(frames, blank_lp),
                                          _on(labels, blank_lp), True)
        return occ_b + occ_l
    with _serial_torch() as n_threads:
        _, occ_blank, occ_label = _lattice(
            _as_float64(blank_lp), _as_float64(label_lp), frames, labels, True, n_threads
        )
    return torch.from_numpy(occ_blank + occ_label)
