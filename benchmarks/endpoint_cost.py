"""What endpointing and voice activity detection cost beside decoding.

    python benchmarks/endpoint_cost.py [--seconds 60] [--repeats 3]

Audio: espeak-ng sentences with pauses (the tests' own recording, repeated to ``--seconds``).

- Endpoints: an RNN-T stream (the 4-language LID model, random weights sharpened so that it
  emits labels; the search's cost does not depend on training) fed in 100 ms pieces, with and
  without asking ``is_endpoint`` after each piece; the extra CPU time against the stream's.
- VAD: the Silero network, and WebRTC's detector, over the same audio against the shipped CTC
  model's transcription of it (``--model``, default en_ctc_t2), and against the RNN-T
  stream's decoding.

Process CPU time, one thread, interleaved repeats, medians; target: each at most 5% of the
decode time.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--model", default="en_ctc_t2")
    args = p.parse_args()

    import numpy as np
    import torch

    import speechlab
    from speechlab.audio.vad import Vad
    from speechlab.endpoint import EndpointConfig
    from speechlab.processes import machine_load
    from speechlab.testing.audio import spoken_with_pauses
    from speechlab.testing.rnnt import untrained_recognizer

    torch.set_num_threads(1)
    talk, _ = spoken_with_pauses()
    audio = np.tile(talk, int(np.ceil(args.seconds * 16000 / len(talk))))[: int(args.seconds * 16000)]
    rnnt = untrained_recognizer(languages=("en", "hi", "ta", "gu"))
    ctc = speechlab.load(args.model)
    engines = {"vad": Vad(), "vad webrtc": Vad(engine="webrtc")}

    def stream(check: bool) -> None:
        s = rnnt.stream(endpoint=EndpointConfig(silence_after_text=float("inf"),
                                                silence_before_text=float("inf"),
                                                max_utterance=float("inf")))
        for at in range(0, len(audio), 1600):
            s.accept_waveform(audio[at:at + 1600])
            if check:
                s.is_endpoint  # noqa: B018 (the check is what is timed)
        s.finish()

    def detect(vad: Vad) -> None:
        vad.reset()
        for at in range(0, len(audio), 1600):
            vad.accept(audio[at:at + 1600])

    work = {"rnnt stream": lambda: stream(False), "rnnt stream + is_endpoint": lambda: stream(True),
            **{name: (lambda v=v: detect(v)) for name, v in engines.items()},
            f"{args.model} transcribe": lambda: ctc.transcribe(audio, 16000)}
    for fn in work.values():  # warm up (graphs, sessions)
        fn()
    times: dict[str, list[float]] = {k: [] for k in work}
    for _ in range(args.repeats):
        for name, fn in work.items():
            start = time.process_time()
            fn()
            times[name].append(time.process_time() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{args.seconds:g} s of speech with pauses, 1 thread, median of {args.repeats}; "
          f"{machine_load()}")
    for name, t in med.items():
        print(f"  {name:28s} {t:7.2f} s CPU (RTF {t / args.seconds:.3f})")
    endpoints = med["rnnt stream + is_endpoint"] - med["rnnt stream"]
    print(f"  endpoint checks: {100 * endpoints / med['rnnt stream']:+.1f}% of the RNN-T "
          "stream's decode time (target at most 5%)")
    for engine, label in (("vad", "VAD (silero)"), ("vad webrtc", "VAD (webrtc)")):
        for name in ("rnnt stream", f"{args.model} transcribe"):
            print(f"  {label}: {100 * med[engine] / med[name]:.1f}% of the {name}'s decode time "
                  "(target at most 5%)")


if __name__ == "__main__":
    main()
