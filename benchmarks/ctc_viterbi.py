"""Viterbi decoding (eq. 8 of the CTC-topologies paper) over a realistic T o L o G: time per
500-frame utterance, and our wrapper's overhead over calling kaldi-decoder directly.

Run:  python benchmarks/ctc_viterbi.py [--words 3000] [--topologies S1-T1 'S3-T2**']
                                       [--utterances 10] [--repeats 6]

The world: English sentences harvested from Debian catalogs (``speechlab.data.text_harvest``;
word-list strings if the harvest is unavailable), normalized; the vocabulary is the ``--words``
most frequent words that CMUdict can pronounce; of the sentences wholly inside it, 5% are held
out as test utterances and a trigram Kneser-Ney LM is trained on the others
(``lm_training_sentences`` drops every held-out one). ``S_dec`` is built by
``cached_decoding_graph`` (recipe ``--recipe``, default "full"; built once, then read from the cache).

Emissions: each held-out sentence is aligned over 500 frames (blank, every phone along its state
chain, a blank between words and at the end, blank and self-loop tokens stretched to fill) and
each frame's log-probabilities are ``log_softmax(N(0, sigma^2) noise + bonus on the aligned
token)``: peaky like a trained CTC model, noisy enough that the search works. The WER of the
decoded words against the sentences is printed as a sanity check.

Timed in one fresh spawned process (graph and emissions loaded, one warm-up first), single
thread: each utterance is decoded by both back to back, alternating which goes first per round,
so that load from other users of the shared machine hits both alike; ``--repeats`` rounds over
all utterances, the overhead is the median over rounds of ours/direct - 1:
  ours    ``ViterbiDecoder.decode`` (beam 32, max active 2000, alpha ``--alpha``): words,
          alignment and scores out;
  direct  what a caller of kaldi-decoder writes: ``DecodableCtc(alpha * logp)``,
          ``FasterDecoder.decode``, ``get_best_path``, ``get_linear_symbol_sequence``.
Target: ours within 10% of direct.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import call_in_child, format_table

FRAMES = 500
FRAME_SECONDS = 0.02  # wav2vec 2.0 outputs, as in the paper


def english_sentences(seed: int) -> tuple[list[list[str]], str]:
    """Normalized English sentences (word lists) and where they came from."""
    from speechlab.data.text_harvest import harvest_sentences, wordlist_strings
    from speechlab.errors import SpeechlabError
    from speechlab.text.normalize import normalize_text

    try:
        texts, source = [s.text for s in harvest_sentences(["en"])["en"]], "harvested"
    except SpeechlabError as e:  # no Debian packages: word-list strings, still English words
        print(f"harvest unavailable ({e}); using wamerican word strings")
        texts, source = [s.text for s in wordlist_strings("en", 20000, seed)], "wamerican"
    return [normalize_text(t, "en").split() for t in texts], source


def build_world(num_words: int, test_fraction: float, seed: int):
    from speechlab.text.lexicon import cmudict_lexicon
    from speechlab.text.ngram import NgramConfig, estimate, lm_training_sentences

    sentences, source = english_sentences(seed)
    freq = collections.Counter(w for s in sentences for w in s)
    candidates = cmudict_lexicon([w for w, _ in freq.most_common(3 * num_words)])
    vocab = [w for w, _ in freq.most_common() if w in candidates][:num_words]
    lexicon = candidates.subset(vocab)
    inside = [" ".join(s) for s in sentences if s and all(w in lexicon for w in s)]
    rng = random.Random(seed)
    rng.shuffle(inside)
    held_out = inside[:max(1, int(len(inside) * test_fraction))]
    lm = estimate(lm_training_sentences(inside, held_out), NgramConfig(order=3))
    return lexicon, lm, held_out, source, len(inside)


def align(name: str, lang, words: list[str], frames: int) -> np.ndarray | None:
    """A frame-level token alignment of ``words`` (first pronunciation) stretched to ``frames``;
    None if it does not fit."""
    from speechlab.asr.ctc import topology

    topo = topology.get(name)
    index = lang.word_index()
    first = {}
    for wid, pron, _ in lang.prons:
        first.setdefault(wid, pron)
    units: list[tuple[int, bool]] = [(0, True)]  # (token, may repeat)
    for w in words:
        for p in first[index[w]]:
            units += [(topology.token(topo, p, s), s in topo.loops) for s in range(topo.states)]
        units.append((0, True))
    repeatable = [i for i, (_, r) in enumerate(units) if r]
    extra = frames - len(units)
    if extra < 0:
        return None
    counts = np.ones(len(units), dtype=np.int64)
    for j in range(extra):
        counts[repeatable[j % len(repeatable)]] += 1
    return np.repeat([t for t, _ in units], counts)


def emissions(tokens: np.ndarray, num_tokens: int, sigma: float, bonus: float,
              rng: np.random.Generator) -> np.ndarray:
    logits = rng.normal(0.0, sigma, size=(len(tokens), num_tokens))
    logits[np.arange(len(tokens)), tokens] += bonus
    logits -= logits.max(1, keepdims=True)
    return (logits - np.log(np.exp(logits).sum(1, keepdims=True))).astype(np.float32)


# ---- measured in a spawned child -----------------------------------------------------------


def _load(fst_path: str, data_path: str):
    import kaldifst

    data = np.load(data_path)
    return kaldifst.StdVectorFst.read(fst_path), [data[k] for k in sorted(data.files)]


def make_ours(fst, num_tokens: int, alpha: float):
    from speechlab.asr.ctc.decode import ViterbiConfig, ViterbiDecoder

    decoder = ViterbiDecoder(fst, num_tokens, ViterbiConfig(acoustic_weight=alpha))
    return lambda x: decoder.decode(x).words


def make_direct(fst, alpha: float):
    import kaldi_decoder
    import kaldifst

    opts = kaldi_decoder.FasterDecoderOptions(beam=32.0, max_active=2000)
    decoder = kaldi_decoder.FasterDecoder(fst, opts)

    def decode(x, fst=fst):  # the C++ decoder does not keep the graph alive: we must
        decoder.decode(kaldi_decoder.DecodableCtc(x if alpha == 1.0 else alpha * x))
        _, path = decoder.get_best_path()
        return tuple(kaldifst.get_linear_symbol_sequence(path)[2])

    return decode


def _interleaved_child(conn, fst_path: str, data_path: str, alpha: float, repeats: int) -> None:
    """Per round, the total seconds of ours and of direct over all utterances, each utterance
    decoded by both back to back (order alternating by round), so that load from other users
    of the machine hits both alike."""
    import traceback

    try:
        import torch

        torch.set_num_threads(1)
        fst, utts = _load(fst_path, data_path)
        ours, direct = make_ours(fst, utts[0].shape[1], alpha), make_direct(fst, alpha)
        assert ours(utts[0]) == direct(utts[0])  # same decoder, same answer; also a warm-up
        rounds = []
        for r in range(repeats):
            spent = {"ours": 0.0, "direct": 0.0}
            order = (("ours", ours), ("direct", direct))
            for x in utts:
                for label, fn in (order if r % 2 == 0 else order[::-1]):
                    t0 = time.perf_counter()
                    fn(x)
                    spent[label] += time.perf_counter() - t0
            rounds.append(spent)
        conn.send(("ok", rounds))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


def measure_interleaved(fst_path: Path, data_path: Path, alpha: float, repeats: int):
    return call_in_child(_interleaved_child, (str(fst_path), str(data_path), alpha, repeats))


# ---- driver --------------------------------------------------------------------------------


def run(num_words: int, topologies: list[str], utterances: int, repeats: int, alpha: float,
        sigma: float, bonus: float, seed: int, cache_dir: Path | None,
        recipe: str = "full") -> dict:
    from speechlab.asr.ctc.decode import ViterbiConfig, ViterbiDecoder
    from speechlab.asr.ctc.graphs import cached_decoding_graph
    from speechlab.data.text_harvest import default_cache_dir
    from speechlab.metrics.error_rate import wer

    start = time.perf_counter()
    lexicon, lm, held_out, source, inside = build_world(num_words, 0.05, seed)
    lm_seconds = time.perf_counter() - start
    cache_dir = cache_dir or default_cache_dir() / "graphs"
    results: dict = {"settings": {"words": num_words, "text": source, "in_vocab_sentences": inside,
                                  "held_out": len(held_out), "ngrams": [len(g) for g in lm.ngrams],
                                  "utterances": utterances, "frames": FRAMES, "alpha": alpha,
                                  "sigma": sigma, "bonus": bonus, "beam": 32, "max_active": 2000,
                                  "world_seconds": round(lm_seconds, 1)},
                     "topologies": {}}
    with tempfile.TemporaryDirectory(prefix="ctc-viterbi-") as tmp:
        arpa = Path(tmp) / "lm.arpa"
        lm.write(arpa)
        for name in topologies:
            t0 = time.perf_counter()
            graph = cached_decoding_graph(cache_dir, name, lexicon, arpa, recipe=recipe)
            graph_seconds = time.perf_counter() - t0
            rng = np.random.default_rng(seed)
            refs, utts = [], []
            for sentence in held_out:
                tokens = align(graph.topology, graph.lang, sentence.split(), FRAMES)
                if tokens is not None and len(sentence.split()) >= 3:
                    refs.append(sentence)
                    utts.append(emissions(tokens, graph.num_tokens, sigma, bonus, rng))
                if len(utts) == utterances:
                    break
            fst_path, data_path = Path(tmp) / "S_dec.fst", Path(tmp) / "utts.npz"
            graph.fst.write(str(fst_path))
            np.savez(data_path, **{f"u{i:04d}": u for i, u in enumerate(utts)})
            decoder = ViterbiDecoder(graph.fst, graph.num_tokens,
                                     ViterbiConfig(acoustic_weight=alpha))
            hyps = [" ".join(graph.words(decoder.decode(u).words)) for u in utts]
            rounds = measure_interleaved(fst_path, data_path, alpha, repeats)
            n = len(utts)
            ours_s = [r["ours"] for r in rounds]
            direct_s = [r["direct"] for r in rounds]
            ratios = [o / d for o, d in zip(ours_s, direct_s)]
            results["topologies"][graph.topology] = {
                "recipe": graph.recipe, "states": graph.info["states"], "arcs": graph.info["arcs"],
                "graph_seconds": round(graph_seconds, 1), "utterances": n,
                "wer": wer(refs, hyps).wer,
                "ours_ms": 1000 * statistics.median(ours_s) / n,
                "direct_ms": 1000 * statistics.median(direct_s) / n,
                "ours_min_ms": 1000 * min(ours_s) / n, "direct_min_ms": 1000 * min(direct_s) / n,
                "overhead_median": statistics.median(ratios) - 1,
                "overhead_min": min(ours_s) / min(direct_s) - 1,
                "ratios": [round(x, 4) for x in ratios],
                "rtf": statistics.median(ours_s) / n / (FRAMES * FRAME_SECONDS),
            }
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--words", type=int, default=3000, help="lexicon/LM vocabulary size")
    p.add_argument("--topologies", nargs="+", default=["S1-T1", "S3-T2**"])
    p.add_argument("--utterances", type=int, default=10)
    p.add_argument("--repeats", type=int, default=6,
                   help="rounds over all utterances (even: each order goes first as often)")
    p.add_argument("--alpha", type=float, default=1.0, help="acoustic weight of eq. (8)")
    p.add_argument("--sigma", type=float, default=1.5, help="emission noise")
    p.add_argument("--bonus", type=float, default=5.0, help="logit bonus of the aligned token")
    p.add_argument("--recipe", default="full", help="graph recipe: full, lg or none")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="graph cache (default $SPEECHLAB_CACHE/graphs)")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    a = p.parse_args(argv)
    res = run(a.words, a.topologies, a.utterances, a.repeats, a.alpha, a.sigma, a.bonus, a.seed,
              a.cache_dir, a.recipe)
    s = res["settings"]
    print(f"Viterbi decoding, {s['frames']}-frame utterances, beam 32, max active 2000, "
          f"alpha {a.alpha:g}, 1 thread; {s['words']}-word CMUdict lexicon, trigram KN LM "
          f"{s['ngrams']} from {s['text']} English text")
    rows = []
    for name, r in res["topologies"].items():
        rows.append([name, r["recipe"], r["states"], r["arcs"], r["graph_seconds"],
                     r["utterances"], f"{100 * r['wer']:.1f}", r["direct_ms"], r["ours_ms"],
                     f"{100 * r['overhead_median']:+.1f}%", f"{100 * r['overhead_min']:+.1f}%",
                     f"{r['rtf']:.4f}"])
    print(format_table(["topology", "recipe", "states", "arcs", "graph s", "utts", "WER %",
                        "direct ms/utt", "ours ms/utt", "overhead (median)", "overhead (min)",
                        "RTF"], rows))
    if a.json:
        from speechlab.files import atomic_write_json

        atomic_write_json(a.json, res)
    else:
        print(json.dumps({k: {"overhead_median": round(v["overhead_median"], 4),
                              "ms_per_utt": round(v["ours_ms"], 2)}
                          for k, v in res["topologies"].items()}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
