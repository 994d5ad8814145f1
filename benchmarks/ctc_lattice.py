"""Benchmark of CTC lattices with BPP/BHP (Sec. 2.3 of the CTC-topologies paper) and of CTC
prefix beam search, per 500-frame utterance, on CPU.

Run:  python benchmarks/ctc_lattice.py [--utts N] [--repeats N] [--words N] [--peak X ...]
                                        [--ref-python PATH]

The decoding graph is a realistic ``T o L o G`` built here: S1-T1 (CTC) over the 39 ARPAbet
phones, a CMUdict lexicon of ``--words`` words (3,000) with disambiguation symbols, a backoff
bigram G (unigram + 5 bigrams per word), ``det(L o G)`` with the symbols then removed, composed
with T (about 38k states). The "network output" is a simulated peaky CTC posterior: a random
word sequence of that G spelled phone by phone, each phone a 1-2 frame spike on a blank
background (blank ``--peak`` above N(0, 1) noise, the phone 8 nats above blank); 30% of the
spikes are unsure of their frame (on a neighbouring frame the phone is 2-5 nats below blank:
alignments compete, which is what makes the paper's BPP small) and 20% confusable (another
phone 0-3 nats below: competing words). These rates put mean BPP near the paper's 0.1-1%.
The word sequence is sampled from G (seen bigrams 90% of the time), as test sentences
are likely under a real LM.
``--peak`` sets how sure the model is: 12 leaves the other phones near -12 nats per frame;
16 is closer to a trained wav2vec 2.0 CTC model.

Table 1: lattice generation + BPP and BHP (+ the lattice full-sum decision) per utterance:
  ours          ``lattice.generate`` + ``lattice_metrics.path_proportions`` (+ ``fullsum_best``),
                at the paper's search settings (beam 32, max-active 2000) with lattice beam 8
                (the default, as the paper's lattice-analysis script) and 16, one path per
                (tokens, words); and at the lattice beam of the paper's text (32) with graph
                paths (k2-style sums: unique paths would split millions of word histories);
  kaldi Viterbi ``kaldi_decoder.FasterDecoder`` (beam 32, max-active 2000): the Viterbi decode
                the paper runs anyway, no lattice; the reference for the ratio;
  kaldi lattice ``kaldi_decoder.LatticeSimpleDecoder`` + its raw lattice (no max-active, so
                only at beam 16 / lattice beam 8, where ours is timed too).
Table 2: prefix beam search at beam 32 (token_min_logp -5, beam_prune_logp -10, no LM) against
a plain textbook prefix search written below (dicts of prefixes; the same pruning) measured in
the same run, and pyctcdecode / flashlight-text when importable here or in ``--ref-python``
(pyctcdecode needs numpy < 2, the project venv has numpy 2).

Measured on the 2 shared cores (load ~2.5), 4 utterances, ms per utterance, peak 16 / 12:
kaldi Viterbi 5.5 / 13.0; ours at the defaults (32/2000/8) lattice + BPP/BHP 6.0 / 13.8, with
full-sum 6.5 / 13.9 (mean BPP 0.08, BHP > 0.5 for 3 of 4, the 4th a homophone tie at 0.5);
lattice beam 16: 9.0 / 17.0. Prefix search 5.7 / 5.7 against pyctcdecode 34.0 / 35.5 (5.9x /
6.2x), flashlight-text 32.8 / 37.6, plain reference 38.0 / 47.0 (``--ref-python`` a venv with
numpy<2, pyctcdecode 0.5, flashlight-text 0.0.7).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from _common import format_table, measure

PAPER = dict(beam=32.0, max_active=2000)  # Sec. 3.2


# -- the decoding graph --------------------------------------------------------------------
def build_graph(num_words: int, seed: int = 0):
    """T o L o G as a kaldifst FST, phone ids of each word's first pronunciation, the number
    of phones, and G's unigram and seen successors (to sample word sequences from)."""
    import kaldifst

    from speechlab.asr.ctc import topology
    from speechlab.text.lexicon import _cmudict, cmudict_lexicon

    rng = np.random.default_rng(seed)
    pool = sorted(w for w in _cmudict() if w.isalpha() and 2 <= len(w) <= 8)
    lex = cmudict_lexicon(rng.choice(pool, num_words, replace=False).tolist())
    phone_id = {p: i + 1 for i, p in enumerate(lex.phones)}
    word_id = {w: i + 1 for i, w in enumerate(lex.words)}
    P, V = len(phone_id), len(word_id)
    disambig0, backoff_word = P + 1, V + 1  # "#0" (L input, G backoff) and #1.. after it
    prons = [(w, tuple(phone_id[p] for p in pron)) for w, pron in lex.items()]
    count: dict[tuple, int] = {}
    for _, pron in prons:
        count[pron] = count.get(pron, 0) + 1
    prefixes = {pron[:i] for _, pron in prons for i in range(1, len(pron))}
    used: dict[tuple, int] = {}
    lines, n = [], 1
    for w, pron in prons:
        labels = list(pron)
        if count[pron] > 1 or pron in prefixes:  # homophone or prefix: a #k disambiguates
            used[pron] = used.get(pron, 0) + 1
            labels.append(disambig0 + used[pron])
        s = 0
        for i, lab in enumerate(labels):
            d = 0 if i == len(labels) - 1 else n
            lines.append(f"{s} {d} {lab} {word_id[w] if i == 0 else 0}")
            if d:
                s, n = d, n + 1
    lines += [f"0 0 {disambig0} {backoff_word}", "0"]
    L = kaldifst.compile("\n".join(lines))
    uni = rng.dirichlet(np.ones(V))
    succ = rng.choice(V, (V, 5)) + 1  # word w's 5 seen successors, w = 1..V
    g = []
    for w in range(1, V + 1):
        g.append(f"0 {w} {w} {w} {-math.log(uni[w - 1]):.5f}")
        for nxt, p in zip(dict.fromkeys(succ[w - 1].tolist()), rng.dirichlet(np.ones(5)) * 0.6):
            g.append(f"{w} {nxt} {nxt} {nxt} {-math.log(p):.5f}")
        g += [f"{w} 0 {backoff_word} 0 {-math.log(0.4):.5f}", f"{w}"]
    g.append("0")
    G = kaldifst.compile("\n".join(g))
    kaldifst.arcsort(L, sort_type="olabel")
    kaldifst.arcsort(G, sort_type="ilabel")
    LG = kaldifst.determinize(kaldifst.compose(L, G))
    kaldifst.minimize(LG)
    # disambiguation symbols -> epsilon
    out = []
    for line in LG.to_str().splitlines():
        f = line.split()
        if len(f) >= 4:
            f[2] = "0" if int(f[2]) >= disambig0 else f[2]
            f[3] = "0" if int(f[3]) == backoff_word else f[3]
        out.append(" ".join(f))
    LG = kaldifst.compile("\n".join(out))
    T = topology.build("S1-T1", P)
    kaldifst.arcsort(T, sort_type="olabel")
    kaldifst.arcsort(LG, sort_type="ilabel")
    TLG = kaldifst.compose(T, LG)
    kaldifst.arcsort(TLG, sort_type="ilabel")
    first = {}
    for w, pron in prons:
        first.setdefault(w, pron)
    lm = {"unigram": uni.tolist(), "successors": succ.tolist()}
    return TLG, [first[w] for w in lex.words], P, lm


def emission(prons: list[tuple[int, ...]], num_phones: int, lm: dict, frames: int,
             peak: float, seed: int) -> np.ndarray:
    """(frames, 1 + P) float32 log-probs of a simulated CTC model (module doc)."""
    rng = np.random.default_rng(seed)
    uni, succ = np.asarray(lm["unigram"]), lm["successors"]
    seq: list[int] = []
    word = int(rng.choice(len(uni), p=uni))
    while True:  # a word sequence G likes: seen bigrams 90% of the time
        pron = prons[word]
        if (len(seq) + len(pron)) * 4 > frames:
            break
        seq += pron
        word = (succ[word][rng.integers(5)] - 1 if rng.random() < 0.9
                else int(rng.choice(len(uni), p=uni)))
    V = 1 + num_phones
    logits = rng.normal(0.0, 1.0, (frames, V))
    logits[:, 0] += peak  # blank everywhere ...
    for p, t in zip(seq, np.linspace(1, frames - 3, len(seq)).astype(int)):
        width = rng.integers(1, 3)
        logits[t:t + width, p] += peak + 8.0  # ... but under the spikes
        if rng.random() < 0.3:  # a spike unsure of its frame: a neighbour frame competes
            n = t - 1 if rng.random() < 0.5 else t + width
            logits[n, p] += peak - rng.uniform(2.0, 5.0)
        if rng.random() < 0.2:  # a confusable phone: another nearly as likely
            logits[t, rng.integers(1, V)] += peak + 8.0 - rng.uniform(0.0, 3.0)
    logp = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    return logp.astype(np.float32)


def inputs(num_words: int, utts: int, peak: float):
    """The graph (built once per machine and word count, then read from the temp dir: every
    measurement runs in fresh processes) and ``utts`` emissions."""
    import kaldifst

    cache = Path(tempfile.gettempdir()) / f"speechlab-bench-ctc-lattice-v2-{num_words}"
    if not (cache / "meta.json").exists():
        fst, prons, P, lm = build_graph(num_words)
        tmp = cache.with_name(cache.name + f".{os.getpid()}")
        tmp.mkdir(parents=True, exist_ok=True)
        fst.write(str(tmp / "TLG.fst"))
        (tmp / "meta.json").write_text(json.dumps({"prons": prons, "phones": P, "lm": lm}))
        try:
            tmp.rename(cache)
        except OSError:  # another process won the race
            pass
    meta = json.loads((cache / "meta.json").read_text())
    fst = kaldifst.StdVectorFst.read(str(cache / "TLG.fst"))
    prons = [tuple(x) for x in meta["prons"]]
    return fst, [emission(prons, meta["phones"], meta["lm"], 500, peak, seed)
                 for seed in range(utts)]


# -- measured steps (module level: run in spawned children by _common.measure) -------------
def setup_ours(num_words, utts, peak, settings, fullsum):
    from speechlab.asr.ctc import lattice as L
    from speechlab.asr.ctc import lattice_metrics as M

    fst, logps = inputs(num_words, utts, peak)
    graph = L.DecodingGraph.from_fst(fst)
    cfg = L.LatticeConfig(**settings)
    M.fullsum_best(L.generate(graph, logps[0], cfg))  # warm up (numba cache, pages)

    def step():
        for logp in logps:
            lat = L.generate(graph, logp, cfg)
            M.path_proportions(lat)
            if fullsum:
                M.fullsum_best(lat)

    return step


def setup_kaldi_viterbi(num_words, utts, peak, settings):
    import kaldi_decoder as kd

    fst, logps = inputs(num_words, utts, peak)
    opts = kd.FasterDecoderOptions(beam=settings["beam"], max_active=settings["max_active"])

    def step():
        for logp in logps:
            dec = kd.FasterDecoder(fst, opts)
            dec.decode(kd.DecodableCtc(logp))
            dec.get_best_path()

    return step


def setup_kaldi_lattice(num_words, utts, peak, settings):
    import kaldi_decoder as kd

    fst, logps = inputs(num_words, utts, peak)
    cfg = kd.LatticeSimpleDecoderConfig(beam=settings["beam"],
                                        lattice_beam=settings["lattice_beam"])

    def step():
        for logp in logps:
            dec = kd.LatticeSimpleDecoder(fst, cfg)
            dec.decode(kd.DecodableCtc(logp))
            dec.get_raw_lattice()

    return step


def lattice_stats(num_words, utts, peak, settings):
    """Sizes, BPP, BHP and full-sum agreement of ours at ``settings`` (not timed)."""
    from speechlab.asr.ctc import lattice as L
    from speechlab.asr.ctc import lattice_metrics as M

    fst, logps = inputs(num_words, utts, peak)
    graph = L.DecodingGraph.from_fst(fst)
    cfg = L.LatticeConfig(**settings)
    arcs, bpp, bhp, agree = [], [], [], []
    for logp in logps:
        lat = L.generate(graph, logp, cfg)
        props = M.path_proportions(lat)
        arcs.append(lat.num_arcs)
        bpp.append(props.bpp)
        bhp.append(props.bhp)
        agree.append(M.fullsum_best(lat).agrees)
    return {"arcs": float(np.mean(arcs)), "bpp": float(np.mean(bpp)),
            "bhp>0.5": float(np.mean(np.array(bhp) > 0.5)), "agree": float(np.mean(agree))}


PREFIX_CFG = dict(beam=32, token_min_logp=-5.0, beam_prune_logp=-10.0)


def plain_prefix_search(logp: np.ndarray, beam: int, token_min_logp: float,
                        beam_prune_logp: float) -> tuple[int, ...]:
    """Textbook CTC prefix beam search (Hannun et al. 2014): a dict prefix -> (pb, pnb)."""
    def lse(a, b):
        if a == -math.inf:
            return b
        if b == -math.inf:
            return a
        return max(a, b) + math.log1p(math.exp(-abs(a - b)))

    hyps = {(): (0.0, -math.inf)}
    for row in logp.tolist():
        labels = [c for c in range(1, len(row)) if row[c] >= token_min_logp]
        best = max(range(len(row)), key=row.__getitem__)
        if best != 0 and best not in labels:
            labels.append(best)
        nxt: dict[tuple, list] = {}
        for prefix, (pb, pnb) in hyps.items():
            total = lse(pb, pnb)
            entry = nxt.setdefault(prefix, [-math.inf, -math.inf])
            entry[0] = lse(entry[0], total + row[0])
            if prefix:
                entry[1] = lse(entry[1], pnb + row[prefix[-1]])
            for c in labels:
                p = (pb if prefix and prefix[-1] == c else total) + row[c]
                e = nxt.setdefault(prefix + (c,), [-math.inf, -math.inf])
                e[1] = lse(e[1], p)
        scored = sorted(nxt.items(), key=lambda kv: -lse(*kv[1]))
        top = lse(*scored[0][1])
        hyps = {k: tuple(v) for k, v in scored[:beam] if lse(*v) >= top + beam_prune_logp}
    return max(hyps, key=lambda k: lse(*hyps[k]))


def setup_prefix(num_words, utts, peak, which):
    from speechlab.search.prefix import PrefixSearchConfig, prefix_beam_search

    _, logps = inputs(num_words, utts, peak)
    cfg = PrefixSearchConfig(**PREFIX_CFG)
    prefix_beam_search(logps[0][:40], cfg)

    def ours():
        for logp in logps:
            prefix_beam_search(logp, cfg)

    def plain():
        for logp in logps:
            plain_prefix_search(logp, **PREFIX_CFG)

    return ours if which == "ours" else plain


# pyctcdecode and flashlight-text, run wherever they import (this interpreter or another)
EXTERNAL = r'''
import json, sys, time
import numpy as np
logps = [np.load(p) for p in sys.argv[1:]]
V = logps[0].shape[1]
out = {}
def timed(fn, repeats=3):
    fn()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return 1000 * sorted(ts)[len(ts) // 2] / len(logps)
try:
    import pyctcdecode, logging
    logging.getLogger("pyctcdecode").setLevel(logging.ERROR)
    dec = pyctcdecode.build_ctcdecoder([""] + [chr(0x4E00 + i) for i in range(V - 1)])
    out["pyctcdecode"] = timed(lambda: [dec.decode_beams(x, beam_width=32, beam_prune_logp=-10.0,
                                                         token_min_logp=-5.0) for x in logps])
except Exception as e:
    out["pyctcdecode"] = repr(e)[:120]
try:
    from flashlight.lib.text.decoder import (CriterionType, LexiconFreeDecoder,
                                             LexiconFreeDecoderOptions, ZeroLM)
    opts = LexiconFreeDecoderOptions(beam_size=32, beam_size_token=V, beam_threshold=10.0,
                                     lm_weight=0.0, sil_score=0.0, log_add=True,
                                     criterion_type=CriterionType.CTC)
    fl = LexiconFreeDecoder(opts, ZeroLM(), 0, 0, [])
    xs = [np.ascontiguousarray(x, dtype=np.float32) for x in logps]
    out["flashlight-text"] = timed(lambda: [fl.decode(x.ctypes.data, x.shape[0], x.shape[1])
                                            for x in xs])
except Exception as e:
    out["flashlight-text"] = repr(e)[:120]
print(json.dumps(out))
'''


def external_refs(logps: list[np.ndarray], pythons: list[str]) -> dict[str, object]:
    """ms per utterance of pyctcdecode / flashlight-text in the first interpreter where each
    imports; otherwise the import error."""
    found: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="ctc-lattice-bench-") as tmp:
        paths = []
        for i, x in enumerate(logps):
            paths.append(str(Path(tmp) / f"{i}.npy"))
            np.save(paths[-1], x)
        for py in pythons:
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            env.pop("PYTHONPATH", None)
            run = subprocess.run([py, "-c", EXTERNAL, *paths], capture_output=True, text=True,
                                 env=env, timeout=900)
            try:
                res = json.loads(run.stdout.strip().splitlines()[-1])
            except (IndexError, json.JSONDecodeError):
                res = {"pyctcdecode": run.stderr[-120:], "flashlight-text": run.stderr[-120:]}
            for name, value in res.items():
                if not isinstance(found.get(name), float):
                    found[name] = value if isinstance(value, float) else f"{py}: {value}"
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--utts", type=int, default=4, help="500-frame utterances per timed call")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--words", type=int, default=3000)
    p.add_argument("--peak", type=float, nargs="+", default=[16.0, 12.0])
    p.add_argument("--ref-python", default=None,
                   help="another interpreter with pyctcdecode / flashlight-text installed")
    p.add_argument("--json", type=Path, default=None)
    a = p.parse_args()
    per_utt = 1.0 / a.utts
    common = (a.words, a.utts)
    results: dict[str, object] = {"settings": vars(a) | {"json": None}}
    print(f"T o L o G: S1-T1, {a.words} CMUdict words, backoff bigram; {a.utts} simulated "
          f"500-frame utterances per call; ms per utterance = median (min), 1 thread")

    rows = []
    lat_settings = {
        "default (32/2000/8)": dict(PAPER, lattice_beam=8.0),
        "lattice beam 16": dict(PAPER, lattice_beam=16.0),
        "32/2000/32, graph paths": dict(PAPER, lattice_beam=32.0, unique_paths=False),
        "beam 16, lattice beam 8": dict(beam=16.0, max_active=2000, lattice_beam=8.0),
    }
    for peak in a.peak:
        ref = measure(setup_kaldi_viterbi, *common, peak, PAPER, repeats=a.repeats, threads=1)
        rows.append([f"peak {peak:g}", "kaldi Viterbi (32/2000)",
                     f"{ref.median_ms * per_utt:.1f} ({ref.min_ms * per_utt:.1f})", "1.0x",
                     "", "", "", ""])
        for name, settings in lat_settings.items():
            for fullsum in (False, True):
                m = measure(setup_ours, *common, peak, settings, fullsum, repeats=a.repeats,
                            threads=1)
                stats = lattice_stats(*common, peak, settings) if not fullsum else {}
                rows.append(["", f"ours {name}" + (" + full-sum" if fullsum else ""),
                             f"{m.median_ms * per_utt:.1f} ({m.min_ms * per_utt:.1f})",
                             f"{m.median_ms / ref.median_ms:.2f}x",
                             f"{stats['arcs']:.0f}" if stats else "",
                             f"{stats['bpp']:.3f}" if stats else "",
                             f"{stats['bhp>0.5']:.2f}" if stats else "",
                             f"{stats['agree']:.2f}" if stats else ""])
                results[f"peak{peak:g}/ours {name}{'+fullsum' if fullsum else ''}"] = {
                    "ms": m.median_ms * per_utt, **stats}
        small = lat_settings["beam 16, lattice beam 8"]
        k = measure(setup_kaldi_lattice, *common, peak, small, repeats=1, threads=1)
        rows.append(["", "kaldi lattice (16/-/8)",
                     f"{k.median_ms * per_utt:.1f} ({k.min_ms * per_utt:.1f})",
                     f"{k.median_ms / ref.median_ms:.2f}x", "", "", "", ""])
        results[f"peak{peak:g}/kaldi viterbi"] = ref.median_ms * per_utt
        results[f"peak{peak:g}/kaldi lattice 16/8"] = k.median_ms * per_utt
    print()
    print("Table 1: lattice + BPP/BHP per utterance (settings: beam/max-active/lattice beam)")
    print(format_table(["emission", "method", "ms/utt", "vs kaldi Viterbi", "lattice arcs",
                        "mean BPP", "BHP>0.5", "full-sum = Viterbi"], rows))

    rows = []
    for peak in a.peak:
        ours = measure(setup_prefix, *common, peak, "ours", repeats=a.repeats, threads=1)
        plain = measure(setup_prefix, *common, peak, "plain", repeats=1, threads=1)
        _, logps = inputs(*common, peak)
        refs = external_refs(logps, [sys.executable] + ([a.ref_python] if a.ref_python else []))
        o = ours.median_ms * per_utt
        rows.append([f"peak {peak:g}", "ours", f"{o:.1f} ({ours.min_ms * per_utt:.1f})", "1.0x"])
        rows.append(["", "plain reference", f"{plain.median_ms * per_utt:.1f}",
                     f"{plain.median_ms * per_utt / o:.1f}x"])
        for name, value in refs.items():
            rows.append(["", name, f"{value:.1f}" if isinstance(value, float) else "n/a",
                         f"{value / o:.1f}x" if isinstance(value, float) else str(value)[:70]])
        results[f"peak{peak:g}/prefix"] = {"ours": o, "plain": plain.median_ms * per_utt, **refs}
    print()
    print("Table 2: CTC prefix beam search, beam 32, no LM, per utterance")
    print(format_table(["emission", "method", "ms/utt", "time / ours"], rows))
    if a.json:
        a.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
