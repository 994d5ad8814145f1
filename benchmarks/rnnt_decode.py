"""Streaming LID-free decoding speed of the multi-softmax LID RNN-T, with and without early stop,
with its networks run by PyTorch and as ONNX graphs by onnxruntime.

Measures the real-time factor (decode CPU time / audio duration, 10 ms feature frames before
stacking) on one thread of a randomly initialised model with four languages (the paper's
vocabularies; the ``demo`` preset's LSTM encoder unless ``--preset`` says otherwise, e.g.
``fast`` for the causal Transformer encoder), four parallel decoders, features fed in
streaming chunks. The paper reports T_avg (Table 7) but leaves the CPU cost to future work;
this prints both, so the CPU saving can be set against the T_avg saving.

Both backends run the same search code on the same features in the same process, their
repeats interleaved (the machine is shared); the ONNX graphs are exported from the model in
memory (``asr.rnnt.onnx_graphs``), onnxruntime on one intra-op thread. The top-level keys are
the PyTorch backend's (as before); ``onnx`` holds the same for the ONNX backend,
``onnx_speedup`` the PyTorch / ONNX RTF ratios, ``same_hypotheses`` whether every decoder's
best hypothesis agreed.

``decoder_scaling`` says why early stopping saves less CPU than T_avg, per backend: the
encoder's CPU and the search's with the first 1, 2, 3, 4 languages' decoders on every frame
(same frames), split into the network calls and the search's own Python. The decoders share
each network call, so a call's cost grows slowly with its rows, and the decoders early stopping
switches off were the cheap ones. From these it bounds the with/without ratio from below:
``floor`` has the other decoders switched off on the first frame ``tau`` allows (the search as
it is), ``floor_networks`` the same with the search's Python costing nothing (the bound a faster
search approaches; a slower search's Python, which grows with the decoders, lowers the ratio).

A random model's LID posteriors are nearly flat, so which decoders stop is arbitrary;
``--lid-bias`` adds a constant to one language's LID logit to mimic a confident trained LID.

    python benchmarks/rnnt_decode.py --seconds 4 --tau 10 --s-th 0.5

``--sherpa`` adds the comparison with sherpa-onnx (``pip install -e '.[bench]'``) on a model of
the same sizes: one language (English's vocabulary, 133 labels), the ``demo`` preset's LSTM
encoder and joint network, random weights. sherpa-onnx runs them in its ``lstm`` layout
(``benchmarks/sherpa_peer.py`` writes it: the same encoder and joint weights, icefall's
metadata); speechlab runs its own ONNX graphs of the model. Both hear the same audio (espeak-ng
sentences with pauses, ``speechlab.testing.audio.spoken_with_pauses``) in 100 ms pieces, one
thread, fbank included on both sides, 30 feature frames per encoder call on both, beam 4
(sherpa-onnx's modified beam search with 4 active paths), repeats interleaved, process CPU
time; the ratio is the median of the repeats' ratios (each repeat decodes on both, back to
back). What differs, and so what the ratio includes:

- the prediction network: speechlab's is the paper's stateful LSTM (2 x 128), stepped for each
  new label prefix; sherpa-onnx's ``lstm`` model type has icefall's stateless one (an
  embedding of the last two labels, a convolution over them, a projection);
- labels per frame: the ratio the target is on runs speechlab's ``modified_beam`` search,
  sherpa-onnx's own algorithm (a label consumes its frame, at most one a frame). speechlab's
  default ``beam`` search is the standard RNN-T lattice (a label keeps the hypothesis on its
  frame, up to ``--max-symbols`` labels a frame, so a frame costs more joint steps): its
  ratio is printed too;
- the runtime: sherpa-onnx's search and feature pipeline are C++, speechlab's search is Python
  around the same onnxruntime;
- random weights emit labels at random rates, and the search's cost follows the labels: each
  side's blank logit is offset until it emits as many labels over the audio as the sentences
  have graphemes (the rate a trained model has), found by bisection before timing.

It prints the ratio (speechlab / sherpa-onnx CPU time) both ways, and with speechlab's
prediction-network calls taken out (what the stateful predictor costs beyond a stateless one
is at most that).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch

from speechlab.asr.rnnt import (
    PAPER_VOCAB_SIZES,
    DecodeConfig,
    EarlyStopConfig,
    SearchConfig,
    build,
    decode_lid_free,
)
from speechlab.asr.rnnt.networks import RnntNetworks
from speechlab.asr.rnnt.onnx_graphs import export_networks, onnx_networks
from speechlab.asr.rnnt.presets import PRESETS
from speechlab.asr.rnnt.search import search_for
from speechlab.files import atomic_write_json
from speechlab.processes import seed_everything

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sherpa_peer

#: Targets (demo preset, 4 decoders, beam 4, 4 s, one thread): the PyTorch RTF without early
#: stopping; RTF with early stopping (tau=10, s_th=0.5) over RTF without; PyTorch RTF over ONNX
#: RTF on the same search, with and without early stopping.
MAX_RTF = 0.05
MAX_EARLY_STOP_RATIO = 0.5
MIN_ONNX_SPEEDUP = 1.5


def fake_features(seconds: float, dim: int, seed: int) -> torch.Tensor:
    """(T, dim) features correlated over time like log-mel frames (a smoothed random walk)."""
    g = torch.Generator().manual_seed(seed)
    T = int(round(seconds * 100))
    walk = torch.randn(T, dim, generator=g).cumsum(0) * 0.2
    walk = walk - walk.mean(0)
    return walk / (walk.std(0) + 1e-5) + 0.3 * torch.randn(T, dim, generator=g)


def measure(backends: dict[str, RnntNetworks], feats: torch.Tensor, cfg: DecodeConfig,
            repeats: int) -> dict[str, dict[str, object]]:
    """Each backend's median RTF over ``repeats`` decodes, the backends taking turns."""
    cpu = {name: [] for name in backends}
    wall = {name: [] for name in backends}
    results = {}
    for _ in range(repeats):
        for name, networks in backends.items():
            start = time.perf_counter()
            results[name] = decode_lid_free(networks, feats, cfg)
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(results[name].cpu_seconds)
    seconds = feats.shape[0] / 100.0
    return {name: {
        "rtf_cpu": statistics.median(cpu[name]) / seconds,
        "rtf_wall": statistics.median(wall[name]) / seconds,
        "t_avg": r.t_avg,
        "active_frames": r.active_frames,
        "num_frames": r.num_frames,
        "language": r.language,
        "hypotheses": r.hypotheses,
    } for name, r in results.items()}


class _TimedNetworks:
    """A :class:`PredictionJoint` that adds up the CPU its calls take (``seconds``)."""

    def __init__(self, networks) -> None:
        self._networks = networks
        self.seconds = 0.0
        self.steps = 0.0  # of which prediction-network steps

    def __getattr__(self, name: str):
        return getattr(self._networks, name)

    def step(self, *args):
        start = time.process_time()
        out = self._networks.step(*args)
        spent = time.process_time() - start
        self.seconds += spent
        self.steps += spent
        return out

    def log_probs(self, *args):
        start = time.process_time()
        out = self._networks.log_probs(*args)
        self.seconds += time.process_time() - start
        return out


def decoder_scaling(networks: RnntNetworks, feats: torch.Tensor, cfg: DecodeConfig,
                    repeats: int, tau: float) -> dict[str, object]:
    """CPU ms of the streaming encoder over ``feats`` and of the search with the first k
    languages' decoders running every frame, k = 1..L, and of its network calls (medians over
    ``repeats``); the ratio floors of the module doc."""
    languages = list(networks.model.languages)
    step = cfg.chunk_frames or feats.shape[0]
    encoder_ms, chunks = [], []
    for _ in range(repeats):
        start, state, chunks = time.process_time(), networks.encoder.init_state(None), []
        for i in range(0, feats.shape[0], step):
            proj, _, state = networks.encoder(feats[i:i + step], state)
            chunks.append(proj)
        encoder_ms.append((time.process_time() - start) * 1000)
    frames = torch.cat(chunks)
    search_ms, networks_ms = {}, {}
    for k in range(1, len(languages) + 1):
        times, calls = [], []
        # The first search of all warms up, untimed. Whole searches and their network calls
        # are timed in separate searches, so the calls' timers do not lengthen the former.
        for r in range(2 * repeats + (k == 1)):
            timed = _TimedNetworks(networks.prediction_joint) if r % 2 else None
            search = search_for(timed or networks.prediction_joint, languages[:k], cfg.search)
            beams, shared = search.start(), frames[:, None].expand(-1, k, -1)
            if timed:
                timed.seconds = 0.0
            start = time.process_time()
            for t in range(frames.shape[0]):
                beams = search.step(beams, shared[t], t)
            if timed:
                calls.append(timed.seconds * 1000)
            elif not (k == 1 and r == 0):
                times.append((time.process_time() - start) * 1000)
        search_ms[k], networks_ms[k] = statistics.median(times), statistics.median(calls)
    enc, L, T = statistics.median(encoder_ms), len(languages), frames.shape[0]
    # The earliest switch-off tau allows: at the first frame t > tau (early_stop), so the
    # other decoders run floor(tau) + 2 frames, the first decoder every frame.
    early = min(T, math.floor(tau) + 2) / T if math.isfinite(tau) else 1.0

    def floor(cost: dict[int, float]) -> float:
        return (enc + cost[1] + early * (cost[L] - cost[1])) / (enc + cost[L])

    return {"encoder_ms": enc, "search_ms": search_ms, "networks_ms": networks_ms,
            "frames": T, "floor": floor(search_ms), "floor_networks": floor(networks_ms)}


def run(seconds: float = 4.0, method: str = "beam", beam: int = 4, max_symbols: int = 3,
        chunk_frames: int = 32, tau: float = 10, s_th: float = 0.5, lid_bias: float = 0.0,
        repeats: int = 3, seed: int = 0, preset: str = "demo") -> dict[str, object]:
    torch.set_num_threads(1)
    seed_everything(seed)
    model = build("multisoftmax_lid", PAPER_VOCAB_SIZES, preset).eval()
    if lid_bias:
        with torch.no_grad():
            model.lid_head.bias[0] += lid_bias
    feats = fake_features(seconds, model.encoder.feature_dim, seed)
    search = SearchConfig(method, beam, max_symbols)
    start = time.perf_counter()
    backends = {"torch": RnntNetworks.torch(model),
                "onnx": onnx_networks(model, export_networks(model), threads=1)}
    export_seconds = time.perf_counter() - start
    for networks in backends.values():
        decode_lid_free(networks, feats[:100], DecodeConfig(search=search))  # warm-up
    base = measure(backends, feats, DecodeConfig(search=search, chunk_frames=chunk_frames),
                   repeats)
    stop = measure(backends, feats, DecodeConfig(search=search, chunk_frames=chunk_frames,
                                                 early_stop=EarlyStopConfig(tau, s_th)), repeats)
    same = all(r["torch"]["hypotheses"] == r["onnx"]["hypotheses"] for r in (base, stop))
    scaling = {name: decoder_scaling(networks, feats, DecodeConfig(
        search=search, chunk_frames=chunk_frames), repeats, tau)
        for name, networks in backends.items()}
    for r in (base, stop):
        for b in r.values():
            b.pop("hypotheses")
    return {
        "settings": {"seconds": seconds, "method": method, "beam": beam, "max_symbols": max_symbols,
                     "chunk_frames": chunk_frames, "tau": tau, "s_th": s_th, "lid_bias": lid_bias,
                     "repeats": repeats, "threads": torch.get_num_threads(), "preset": preset,
                     "decoders": len(PAPER_VOCAB_SIZES), "onnx_threads": 1,
                     "onnx_export_seconds": export_seconds},
        "no_early_stop": base["torch"],
        "early_stop": stop["torch"],
        "rtf_ratio": stop["torch"]["rtf_cpu"] / base["torch"]["rtf_cpu"],
        "t_avg_ratio": stop["torch"]["t_avg"] / base["torch"]["t_avg"],
        "onnx": {"no_early_stop": base["onnx"], "early_stop": stop["onnx"],
                 "rtf_ratio": stop["onnx"]["rtf_cpu"] / base["onnx"]["rtf_cpu"]},
        "onnx_speedup": {"no_early_stop": base["torch"]["rtf_cpu"] / base["onnx"]["rtf_cpu"],
                         "early_stop": stop["torch"]["rtf_cpu"] / stop["onnx"]["rtf_cpu"]},
        "same_hypotheses": same,
        "decoder_scaling": scaling,
    }


#: Target: speechlab's CPU time over sherpa-onnx's on the same-size model (``--sherpa``).
MAX_SHERPA_RATIO = 1.5
#: The random joint network's encoder projection and output layer are scaled by these, so that
#: its logits vary with the frame and the labels as a trained model's do (untrained, the
#: projected frames hardly change over the audio and the logits are nearly uniform: the labels
#: emitted jump from none to every frame's maximum at one blank offset).
ENCODER_GAIN = 30.0
SHARPEN = 8.0


def _offset_for(labels_at, target: int, lo: float = 0.0, hi: float = 16.0,
                steps: int = 14) -> tuple[float, int]:
    """The blank-logit offset at which ``labels_at(offset)`` (labels emitted, falling as the
    offset rises) comes nearest ``target``, by bisection; with the labels it gives."""
    best = (lo, labels_at(lo))
    for _ in range(steps):
        mid = (lo + hi) / 2
        n = labels_at(mid)
        if abs(n - target) < abs(best[1] - target):
            best = (mid, n)
        if n > target:
            lo = mid
        else:
            hi = mid
    return best


def sherpa_comparison(beam: int = 4, max_symbols: int = 3, repeats: int = 5, seed: int = 0,
                      chunk: int = 30, method: str = "beam") -> dict[str, object]:
    """speechlab's ONNX RNN-T against sherpa-onnx on a same-size model (module doc)."""
    import tempfile

    import numpy as np

    import sherpa_peer
    from speechlab.asr.rnnt.recognizer import RnntRecognizer
    from speechlab.audio.transforms import GlobalCMVN
    from speechlab.testing.audio import SENTENCES, spoken_with_pauses
    from speechlab.text.graphemes import GraphemeTokenizer

    torch.set_num_threads(1)
    seed_everything(seed)
    V = PAPER_VOCAB_SIZES["en"]
    tokenizer = GraphemeTokenizer("en", [chr(0x21 + i) for i in range((V - 1) // 2)],
                                  normalize=False)
    model = build("mono", {"en": V}, "demo").eval()
    with torch.no_grad():  # logits that vary with the frame and the labels, as trained ones do
        model.joiner.enc_proj.weight.mul_(ENCODER_GAIN)
        model.joiner.outputs[0].weight.mul_(SHARPEN)
    cmvn = GlobalCMVN(dim=model.encoder.feature_dim)
    cmvn.accumulate(torch.randn(400, cmvn.dim) * 3 + 5)  # features are scaled, not normalised
    cmvn = cmvn.finalize()
    audio, _ = spoken_with_pauses()
    audio = audio.astype(np.float32)
    seconds = len(audio) / 16000
    target = sum(len(s.replace(" ", "")) for s in SENTENCES)
    piece = 1600
    blank_bias = float(model.joiner.outputs[0].bias[0].detach())
    search = SearchConfig(method, beam, max_symbols)

    def ours(offset: float, onnx: bool) -> RnntRecognizer:
        with torch.no_grad():
            model.joiner.outputs[0].bias[0] = blank_bias + offset
        rec = RnntRecognizer(model, {"en": tokenizer}, cmvn, search=search, chunk_frames=chunk)
        return rec.onnx(threads=1) if onnx else rec

    def run_ours(rec: RnntRecognizer) -> tuple[int, float]:
        start = time.process_time()
        stream = rec.stream()
        for at in range(0, len(audio), piece):
            stream.accept_waveform(audio[at:at + piece])
        labels = len(stream.finish().text.replace(" ", ""))
        return labels, time.process_time() - start

    with tempfile.TemporaryDirectory() as tmp:
        def peer(offset: float):
            with torch.no_grad():
                model.joiner.outputs[0].bias[0] = blank_bias + offset
            files = sherpa_peer.export_lstm_transducer(model, list(tokenizer.symbols),
                                                       Path(tmp), chunk=chunk, seed=seed)
            return sherpa_peer.recognizer(files, beam=beam, threads=1)

        ours_offset, ours_labels = _offset_for(lambda o: run_ours(ours(o, False))[0], target)
        peer_offset, peer_labels = _offset_for(
            lambda o: len(sherpa_peer.decode(peer(o), audio, piece)[0]), target)
        rec, srec = ours(ours_offset, True), peer(peer_offset)
        timed = _TimedNetworks(rec.networks.prediction_joint)
        times: dict[str, list[float]] = {"speechlab": [], "sherpa": [], "predictor": []}
        run_ours(rec), sherpa_peer.decode(srec, audio, piece)  # warm-up
        for _ in range(repeats):
            times["speechlab"].append(run_ours(rec)[1])
            times["sherpa"].append(sherpa_peer.decode(srec, audio, piece)[1])
        # the prediction network's share, in separate decodes (its timers cost a little)
        rec = RnntRecognizer(model, {"en": tokenizer}, cmvn, search=search, chunk_frames=chunk,
                             networks=dataclasses.replace(rec.networks, prediction_joint=timed))
        for _ in range(repeats):
            timed.seconds, timed.steps = 0.0, 0.0
            total = run_ours(rec)[1]
            times["predictor"].append(timed.steps / total)
    med = {k: statistics.median(v) for k, v in times.items()}
    # each repeat's two decodes ran back to back: the median of their ratios follows the
    # machine's drifts less than the ratio of the medians
    pair = statistics.median(a / b for a, b in zip(times["speechlab"], times["sherpa"]))
    return {
        "settings": {"method": method, "beam": beam, "max_symbols": max_symbols, "repeats": repeats, "seed": seed,
                     "chunk_frames": chunk, "piece_samples": piece, "seconds": seconds,
                     "vocab": V, "preset": "demo", "threads": 1},
        "target_labels": target,
        "labels": {"speechlab": ours_labels, "sherpa": peer_labels},
        "blank_offset": {"speechlab": ours_offset, "sherpa": peer_offset},
        "rtf": {"speechlab": med["speechlab"] / seconds, "sherpa": med["sherpa"] / seconds},
        "ratio": pair,
        "ratio_of_medians": med["speechlab"] / med["sherpa"],
        "predictor_share": med["predictor"],
        "ratio_without_predictor": pair * (1 - med["predictor"]),
    }


def sherpa_both(beam: int, max_symbols: int, repeats: int, seed: int) -> dict[str, object]:
    """The comparison with speechlab's modified beam search (sherpa-onnx's own search: the
    target's) and with its default search (``beam``)."""
    return {method: sherpa_comparison(beam, max_symbols, repeats, seed, method=method)
            for method in ("modified_beam", "beam")}


def print_sherpa(both: dict[str, object]) -> None:
    res, std = both["modified_beam"], both["beam"]
    rtf, labels, st = res["rtf"], res["labels"], res["settings"]
    print(f"sherpa-onnx comparison ({st['seconds']:.1f} s of espeak-ng speech in 100 ms pieces, "
          f"one language, {st['vocab']} labels, demo sizes, beam {st['beam']}, 1 thread, fbank "
          "included):")
    print(f"  modified beam search on both: speechlab (ONNX) RTF {rtf['speechlab']:.4f} "
          f"({labels['speechlab']} labels), sherpa-onnx RTF {rtf['sherpa']:.4f} "
          f"({labels['sherpa']} labels; {res['target_labels']} graphemes spoken)")
    ok = res["ratio"] <= MAX_SHERPA_RATIO
    print(f"sherpa ratio {res['ratio']:.2f}x (speechlab / sherpa-onnx, the same search; target "
          f"<= {MAX_SHERPA_RATIO:g}x {'ok' if ok else 'MISSED'}); {1 / res['ratio']:.2f}x the "
          f"other way; without speechlab's stateful prediction network "
          f"({res['predictor_share']:.0%} of its time) {res['ratio_without_predictor']:.2f}x")
    print(f"  speechlab's default search (beam: a label keeps its frame, up to "
          f"{std['settings']['max_symbols']} a frame) RTF {std['rtf']['speechlab']:.4f}: "
          f"{std['ratio']:.2f}x sherpa-onnx's modified beam search; without the stateful "
          f"prediction network ({std['predictor_share']:.0%}) "
          f"{std['ratio_without_predictor']:.2f}x")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--method", default="beam")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--max-symbols", type=int, default=3)
    p.add_argument("--chunk-frames", type=int, default=32, help="streaming chunk, 10 ms frames")
    p.add_argument("--tau", type=float, default=10,
                   help="encoder frames (30 ms each; 40 ms for the fast preset)")
    p.add_argument("--s-th", type=float, default=0.5)
    p.add_argument("--lid-bias", type=float, default=0.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--preset", default="demo", choices=sorted(PRESETS),
                   help="model sizes (asr.rnnt.presets); fast: the causal Transformer encoder")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    p.add_argument("--sherpa", action="store_true",
                   help="also compare with sherpa-onnx on a same-size model (module doc)")
    p.add_argument("--sherpa-only", action="store_true",
                   help="only the sherpa-onnx comparison")
    a = p.parse_args(argv)
    if a.sherpa or a.sherpa_only:
        try:
            import sherpa_onnx  # noqa: F401
        except ImportError:
            p.error("--sherpa needs sherpa-onnx: pip install -e '.[bench]'")
    if a.sherpa_only:
        res = {"sherpa": sherpa_both(a.beam, a.max_symbols, max(a.repeats, 15), a.seed)}
        print_sherpa(res["sherpa"])
        if a.json:
            atomic_write_json(a.json, res)
        return 0
    res = run(a.seconds, a.method, a.beam, a.max_symbols, a.chunk_frames, a.tau, a.s_th,
              a.lid_bias, a.repeats, a.seed, a.preset)
    print(f"streaming LID-free decode, {a.preset} preset, 4 decoders, {a.method} (beam {a.beam}), "
          f"{a.seconds:g} s audio, chunks of {a.chunk_frames} frames, 1 thread; PyTorch and "
          "ONNX Runtime backends, the same search")
    print(f"{'':<24}{'RTF torch':>10}{'RTF onnx':>10}{'torch/onnx':>11}{'(wall)':>8}"
          f"{'T_avg':>7}  active frames")
    for key, name in (("no_early_stop", "no early stop"),
                      ("early_stop", f"tau={a.tau:g} s_th={a.s_th:g}")):
        t, o = res[key], res["onnx"][key]
        print(f"{name:<24}{t['rtf_cpu']:>10.3f}{o['rtf_cpu']:>10.3f}"
              f"{res['onnx_speedup'][key]:>10.2f}x{t['rtf_wall'] / o['rtf_wall']:>7.2f}x"
              f"{t['t_avg']:>7.2f}  {t['active_frames']}")
    print(f"with/without early stop: RTF x{res['rtf_ratio']:.2f} (onnx x"
          f"{res['onnx']['rtf_ratio']:.2f}), T_avg x{res['t_avg_ratio']:.2f}; same hypotheses "
          f"on both backends: {'yes' if res['same_hypotheses'] else 'NO'}")
    def verdict(ok: bool) -> str:
        return "ok" if ok else "MISSED"

    speedup = min(res["onnx_speedup"].values())
    at_target_settings = (a.preset, a.seconds, a.tau, a.s_th, a.method, a.beam) == (
        "demo", 4.0, 10, 0.5, "beam", 4)
    if at_target_settings:
        print(f"targets: RTF {res['no_early_stop']['rtf_cpu']:.3f} <= {MAX_RTF:g} "
              f"{verdict(res['no_early_stop']['rtf_cpu'] <= MAX_RTF)}; with/without early "
              f"stop x{res['rtf_ratio']:.2f} <= {MAX_EARLY_STOP_RATIO:g} "
              f"{verdict(res['rtf_ratio'] <= MAX_EARLY_STOP_RATIO)}; ONNX {speedup:.2f}x >= "
              f"{MIN_ONNX_SPEEDUP:g}x {verdict(speedup >= MIN_ONNX_SPEEDUP)}")
    for name, sc in res["decoder_scaling"].items():
        ms, nets = sc["search_ms"], sc["networks_ms"]
        print(f"{name} CPU per {a.seconds:g} s: encoder {sc['encoder_ms']:.0f} ms; search "
              "(its network calls) with "
              + ", ".join(f"{k} decoder{'s' if k > 1 else ''} {v:.0f} ({nets[k]:.0f}) ms"
                          for k, v in ms.items())
              + f"; lowest with/without ratio at tau={a.tau:g}: x{sc['floor']:.2f} (the "
              f"search's Python free: x{sc['floor_networks']:.2f})")
    if a.sherpa:
        res["sherpa"] = sherpa_both(a.beam, a.max_symbols, max(a.repeats, 15), a.seed)
        print_sherpa(res["sherpa"])
    if a.json:
        atomic_write_json(a.json, res)
    else:
        print(json.dumps({"rtf_ratio": res["rtf_ratio"], "t_avg_ratio": res["t_avg_ratio"],
                          "onnx_speedup": res["onnx_speedup"],
                          "same_hypotheses": res["same_hypotheses"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
