"""Everyday English through a CTC-topology model: its own word LM (the corpus's English is
software text) against a general one (WordNet's sentences and definitions, ``speechlab data
general-text``), on held-out sentences read by festival's voices.

The general text is split: every 100th sentence is held out of the LM, and the first
``--sentences`` held-out ones of 6-14 words are read by festival's kal (a voice of training)
and ked (the unseen voice). The general LM is estimated as ``speechlab ctc lm --order ORDER
--vocab VOCAB`` estimates one, and the model decodes with it through ``use_word_lm`` (the
words its lexicon lacks pronounced, T∘L∘G built again and cached). For each voice and LM the
script prints the WER and the share of the references' words outside the graph's vocabulary
(no search can give those). A third row mixes the model's own LM with the general one
(``speechlab ctc lm-mix``, ``--mix`` the own LM's share; ``--own-lm ARPA`` stands in for the
package's LM, e.g. its run's when the package already holds a mixed one). ``--corpus DIR``
adds the corpus's own English test and unseen splits (its first ``--utterances`` of each),
what the model's own LM was made for.

    python benchmarks/general_english.py en_ctc_t2 [--sentences 40] [--order 2]
        [--vocab 20000] [--mix 0.5] [--corpus exp/shipped-topologies/corpus --utterances 200]
        [--own-lm exp/shipped-topologies/lang/en.arpa] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

VOICES = {"kal (training's)": "kal_diphone", "ked (unseen)": "ked_diphone"}
HELD_OUT_EVERY = 100


def split_text(sentences: list[str], n: int) -> tuple[list[list[str]], list[str]]:
    """(the LM's sentences as words, the first ``n`` held-out sentences of 6-14 words)."""
    from speechlab.text.normalize import normalize_text

    lm_text, held = [], []
    for i, s in enumerate(sentences):
        words = normalize_text(s, "en").split()
        if i % HELD_OUT_EVERY:
            lm_text.append(words)
        elif 6 <= len(words) <= 14 and len(held) < n:
            held.append(s)
    return lm_text, held


def estimate_lm(sentences: list[list[str]], order: int, vocab: int, out: Path) -> None:
    from speechlab.text.ngram import NgramConfig, estimate

    counts = Counter(w for words in sentences for w in words)
    keep = {w for w, _ in counts.most_common(vocab)}
    estimate([s for s in sentences if all(w in keep for w in s)],
             NgramConfig(order=order)).write(out)


def corpus_sets(corpus: Path, n: int) -> dict[str, tuple[list[str], list]]:
    """The corpus's English ``test`` and ``unseen`` splits: (references, audio) of the first
    ``n`` utterances of each."""
    from lhotse import CutSet

    from speechlab.text.normalize import normalize_text

    sets = {}
    for split in ("test", "unseen"):
        cuts = [c for c in CutSet.from_file(corpus / f"{split}_cuts.jsonl.gz")
                if c.supervisions[0].language == "en"][:n]
        sets[f"corpus {split}"] = ([normalize_text(c.supervisions[0].text, "en") for c in cuts],
                                   [c.load_audio()[0] for c in cuts])
    return sets


def main(argv: list[str] | None = None) -> int:
    import numpy as np
    import torch

    import speechlab
    from speechlab.data.festival import FestivalItem, synthesize
    from speechlab.data.text_harvest import general_english
    from speechlab.metrics import wer
    from speechlab.text.normalize import normalize_text

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="a CTC-topology model (a shipped name or a path)")
    p.add_argument("--sentences", type=int, default=40)
    p.add_argument("--order", type=int, default=2)
    p.add_argument("--vocab", type=int, default=20000)
    p.add_argument("--mix", type=float, default=0.5,
                   help="the own LM's share in the mixed row (0: no mixed row)")
    p.add_argument("--corpus", type=Path, default=None,
                   help="also the English test and unseen splits of this corpus")
    p.add_argument("--utterances", type=int, default=200)
    p.add_argument("--own-lm", type=Path, default=None, metavar="ARPA",
                   help="the LM to treat as the model's own, e.g. its run's "
                   "(RUN/lang/en.arpa) when the package already holds a mixed one")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    lm_text, held = split_text([s.text for s in general_english()], args.sentences)
    refs = [normalize_text(s, "en") for s in held]
    sets = {f"{label} WER %": (refs, [w.astype(np.float32) / 32768 for w in
                                     synthesize([FestivalItem(s, voice) for s in held])])
            for label, voice in VOICES.items()}
    if args.corpus is not None:
        sets.update({f"{k} WER %": v for k, v in corpus_sets(args.corpus, args.utterances).items()})
    from speechlab.text.ngram import interpolate, read_arpa

    own = speechlab.load(args.model)
    if args.own_lm is not None:
        own.use_word_lm(args.own_lm)
    models = {"own (the package's)" if args.own_lm is None else f"own ({args.own_lm.name})": own}
    with tempfile.TemporaryDirectory() as tmp:
        arpa = Path(tmp) / "general.arpa"
        estimate_lm(lm_text, args.order, args.vocab, arpa)
        models["general (WordNet)"] = speechlab.load(args.model)
        models["general (WordNet)"].use_word_lm(arpa)
        if args.mix:
            mixed = Path(tmp) / "mixed.arpa"
            interpolate(read_arpa(own.arpa), read_arpa(arpa), args.mix).write(mixed)
            models[f"mixed ({args.mix:g} own)"] = speechlab.load(args.model)
            models[f"mixed ({args.mix:g} own)"].use_word_lm(mixed)
    results: dict[str, dict[str, float]] = {}
    print(f"{len(held)} held-out sentences of general English, {len(lm_text)} in the LM "
          f"({args.order}-gram, {args.vocab} most frequent words)")
    print(f"{'LM':<24}{'words':>8}{'OOV %':>8}" + "".join(f"{k:>24}" for k in sets))
    for name, model in models.items():
        vocab = set(model.graph.lang.words)
        words = [w for r in refs for w in r.split()]
        oov = 100 * sum(w not in vocab for w in words) / len(words)
        row = {"words": len(vocab), "oov": round(oov, 2)}
        for key, (truth, audio) in sets.items():
            hyps = [model.transcribe(a, 16000).text for a in audio]
            row[key] = round(100 * wer(truth, hyps).wer, 2)
        results[name] = row
        print(f"{name:<24}{len(vocab):>8}{oov:>8.1f}" + "".join(f"{row[k]:>24.1f}" for k in sets))
    if args.json:
        args.json.write_text(json.dumps({"model": args.model, "sentences": len(held),
                                         "order": args.order, "vocab": args.vocab,
                                         "results": results}, indent=2) + "\n",
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
