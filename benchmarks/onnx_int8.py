"""int8 ONNX against float ONNX and PyTorch for a shipped CTC-topology model.

    python benchmarks/onnx_int8.py [--model en_ctc_t2] [--utterances 100]

The model is exported twice (``speechlab export --format onnx``, with and without ``--int8``)
into a temporary directory; the three backends decode the same test utterances of the run
corpus the model's card names (the first N of its language) with the same graph and LM. It
prints each one's WER against the references, the int8 package's WER change relative to the
float one's (target: at most 2% relative), the acoustic model's time per second of audio with
its fbank, and the network's alone on the same features ("encoder": the target's measure,
int8 at least 1.5x faster than float ONNX), interleaved repeats on one thread, with the
machine's load.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="en_ctc_t2")
    p.add_argument("--utterances", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()

    import torch
    from lhotse import CutSet

    import speechlab
    from speechlab.metrics import wer
    from speechlab.package import read_card
    from speechlab.processes import machine_load
    from speechlab.shipped import resolve
    from speechlab.text.normalize import normalize_text

    torch.set_num_threads(1)
    path = resolve(args.model)
    card = read_card(path)
    run = Path(card.made_by["run"])
    lang = card.languages[0]
    cuts = [c for c in CutSet.from_file(run / "corpus" / "test_cuts.jsonl.gz")
            if c.supervisions[0].language == lang][: args.utterances]
    audio = [(c.load_audio()[0], c.sampling_rate) for c in cuts]
    refs = [normalize_text(c.supervisions[0].text, lang) for c in cuts]
    seconds = sum(len(x) / sr for x, sr in audio)
    with tempfile.TemporaryDirectory() as tmp:
        speechlab.export(path, Path(tmp) / "onnx", format="onnx")
        speechlab.export(path, Path(tmp) / "int8", format="onnx", int8=True)
        models = {"torch": speechlab.load(path), "onnx": speechlab.load(Path(tmp) / "onnx"),
                  "int8": speechlab.load(Path(tmp) / "int8")}
        sizes = {k: (Path(tmp) / k / "acoustic.onnx").stat().st_size / 2**20
                 for k in ("onnx", "int8")}
        feats = [m.log_probs for m in models.values()]  # warm every session once
        for f in feats:
            f(audio[0][0])
        times: dict[str, list[float]] = {k: [] for k in models}
        network: dict[str, list[float]] = {k: [] for k in models}
        inputs = [_network_input(models["torch"], x) for x, _ in audio]
        for _ in range(args.repeats):  # interleaved: the machine's load hits each alike
            for name, m in models.items():
                start = time.process_time()
                for x, sr in audio:
                    m.log_probs(x)  # the corpus is at the models' 16 kHz
                times[name].append(time.process_time() - start)
                start = time.process_time()
                with torch.inference_mode():
                    for feats, lens in inputs:
                        m.model(feats, lens)
                network[name].append(time.process_time() - start)
        errors = {name: 100 * wer(refs, [m.transcribe(x, sr).text for x, sr in audio]).wer
                  for name, m in models.items()}
    print(f"{args.model}: {len(cuts)} {lang} test utterances, {seconds:.0f} s of audio; "
          f"{machine_load()}")
    for name in models:
        cpu = statistics.median(times[name]) / seconds
        net = statistics.median(network[name]) / seconds
        size = f", graph {sizes[name]:.1f} MB" if name in sizes else ""
        print(f"  {name:5s} WER {errors[name]:5.2f}%  acoustic model {1000 * cpu:6.2f} ms CPU "
              f"per second of audio with its fbank, the network alone {1000 * net:6.2f}{size}")
    change = 100 * (errors["int8"] - errors["onnx"]) / max(errors["onnx"], 1e-9)
    speed = statistics.median(times["onnx"]) / statistics.median(times["int8"])
    encoder = statistics.median(network["onnx"]) / statistics.median(network["int8"])
    print(f"  int8 against float ONNX: WER change {change:+.1f}% relative (target: at most +2%); "
          f"the network (encoder) {encoder:.2f}x the speed (target 1.5x); with the fbank "
          f"{speed:.2f}x")


def _network_input(model, samples):
    """What a CTC-topology recognizer feeds its network for ``samples``: CMVN'd fbank (1, T, F)
    and its length (computed once, outside the timing)."""
    import torch

    from speechlab.audio.features import fbank

    feats = torch.from_numpy(fbank(samples, model.fbank))
    lens = torch.tensor([feats.shape[0]])
    return model.cmvn(feats[None], lens)[0], lens


if __name__ == "__main__":
    main()
