"""What a new set of hotwords costs a CTC-topology model, and whether its text is the composed
graph's.

speechlab puts the hotwords' bonus into the search arrays of T∘L∘G and decodes them with its own
beam search. The reference is what it did before: T∘L∘G composed with a one-state transducer
that charges the hotwords ``-score``, decoded by kaldi's decoder. For each set of hotwords this
prints:

- the time of a request with that set, the first time it is seen (the model warmed up as
  ``speechlab serve`` warms it), against a plain request on the same recording;
- the time of the composition alone;
- on every recording, whether the two give the same text.

Recordings: alsa-utils' spoken sounds (a person, ``/usr/share/sounds/alsa``) when present, and
the first English utterances of the run corpus's unseen split.

    python benchmarks/hotword_latency.py [MODEL] [--corpus exp/shipped-topologies/corpus]
        [--utterances 8] [--score 2] [--json out.json]

Exits 1 when any text differs from the composed graph's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).parent))
from accented_english import DEFAULT_CORPUS, english_cuts  # noqa: E402

SETS = (("front", "rear", "side", "center", "left", "right"), ("rear",), ("menu", "toolbar"),
        ("window", "open"))
ALSA = Path("/usr/share/sounds/alsa")


def recordings(corpus: Path, n: int) -> list:
    import numpy as np

    from speechlab.audio.io import audio_info, load_audio, resample

    out = [np.asarray(resample(load_audio(p, None), audio_info(p).sample_rate, 16000),
                      dtype=np.float32)
           for p in sorted(ALSA.glob("*.wav")) if p.name != "Noise.wav"] if ALSA.is_dir() else []
    return out + [c.load_audio()[0] for c in english_cuts(corpus, "unseen", n)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default="en_ctc_t2",
                    help="a CTC-topology model: shipped name or package path (default en_ctc_t2)")
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--utterances", type=int, default=8, help="unseen-split utterances")
    ap.add_argument("--score", type=float, default=2.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    import speechlab
    from speechlab.asr.ctc.decode import ViterbiDecoder
    from speechlab.testing.hotwords import composed_boost

    asr = speechlab.load(args.model)
    if not hasattr(asr, "graph"):
        print(f"hotword_latency: {args.model} is not a CTC-topology model", file=sys.stderr)
        return 2
    audio = recordings(args.corpus, args.utterances)
    if not audio:
        print("hotword_latency: no recording (alsa-utils' sounds or a corpus)", file=sys.stderr)
        return 2
    known = asr.graph.lang.word_index()
    asr.transcribe(audio[0], 16000, nbest=1)  # warm, as speechlab serve does
    rows = []
    for words in SETS:
        words = tuple(w for w in words if w in known)
        if not words:
            continue
        t0 = time.perf_counter()
        asr.transcribe(audio[0], 16000)
        plain = time.perf_counter() - t0
        t0 = time.perf_counter()
        asr.transcribe(audio[0], 16000, hotwords=list(words), hotword_score=args.score)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        fst = composed_boost(asr, words, args.score)
        compose = time.perf_counter() - t0
        decoder = ViterbiDecoder(fst, asr.graph.num_tokens, asr.viterbi)
        same = 0
        for x in audio:
            ours = asr.transcribe(x, 16000, hotwords=list(words), hotword_score=args.score).text
            ref = " ".join(asr.graph.words(decoder.decode(asr.log_probs(x)).words))
            same += ours == ref
        row = {"hotwords": list(words), "plain_s": round(plain, 3),
               "first_with_set_s": round(first, 3), "composition_s": round(compose, 3),
               "same_text": same, "recordings": len(audio)}
        rows.append(row)
        print(json.dumps(row))
    agree = sum(r["same_text"] for r in rows)
    print(f"{args.model}: the same text as the composed graph in {agree} of "
          f"{sum(r['recordings'] for r in rows)} decodes; a new set adds "
          f"{max(r['first_with_set_s'] - r['plain_s'] for r in rows):.2f} s at most to a "
          f"request, where composing took {max(r['composition_s'] for r in rows):.2f} s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    # the target: the arrays decode as the composed graph does
    return 0 if agree == sum(r["recordings"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
