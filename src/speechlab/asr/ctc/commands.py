"""``speechlab ctc``: the CTC-topologies paper's graphs from the command line.

``ctc topology`` prints a topology's token FST T (eq. 6's building block) for a phone count;
``ctc lm`` estimates a Kneser-Ney n-gram LM from a text file and writes it as ARPA, ``ctc
lm-mix`` mixes two into one;
``ctc graph`` builds the decoding graph T∘(L∘G) of eq. 7 from a Kaldi ``lexicon.txt`` and an
ARPA file, as OpenFst files a Kaldi decoder reads. Bad input (a lexicon line without phones, a
broken ARPA line, an LM word without a pronunciation under ``--missing error``, a phone the
phone list lacks) is one error naming the file and line or the word; the output directory is
written under a temporary name and renamed, so it is complete or absent.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
from pathlib import Path

from speechlab.config import bounded, command_group
from speechlab.errors import DataError

log = logging.getLogger(__name__)


def _topology(args: argparse.Namespace) -> int:
    from speechlab.asr.ctc import topology as topo_mod

    spec = topo_mod.get(args.name)
    T = topo_mod.build(spec.name, args.phones)
    arcs = sum(T.num_arcs(s) for s in range(T.num_states))
    print(f"{spec.name}: {args.phones} phone(s), {topo_mod.num_tokens(spec.name, args.phones)} "
          f"network outputs, {T.num_states} states, {arcs} arcs")
    print("# OpenFst text: src dst ilabel(token+1, 0=eps) olabel(phone, 0=eps) cost")
    print(T.to_str(show_weight_one=True).rstrip())
    return 0


def _read_text(path: Path, language: str | None) -> list[str]:
    from speechlab.text.normalize import normalize_text

    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"text file {path} does not exist") from None
    sentences = []
    for lineno, line in enumerate(raw.split(b"\n"), 1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            raise DataError(f"{path}:{lineno}: line is not UTF-8 text") from None
        if "\0" in text:
            # Not whitespace to split on: it would end up inside an ARPA word.
            raise DataError(f"{path}:{lineno}: line holds a NUL byte (binary data, not text); "
                            "remove it")
        text = normalize_text(text, language) if language else text.strip()
        if text:
            sentences.append(text)
    if not sentences:
        raise DataError(f"{path}: no sentences (the file is empty or blank)")
    return sentences


def _lm(args: argparse.Namespace) -> int:
    from collections import Counter

    from speechlab.text.ngram import NgramConfig, estimate

    config = NgramConfig(order=args.order)
    sentences = [s.split() for s in _read_text(args.text, args.language)]
    if args.vocab is not None:
        counts = Counter(w for words in sentences for w in words)
        vocab = {w for w, _ in counts.most_common(args.vocab)}
        kept = [words for words in sentences if all(w in vocab for w in words)]
        log.info("%d of %d sentences use only the %d most frequent words", len(kept),
                 len(sentences), len(vocab))
        sentences = kept
        if not sentences:
            raise DataError(f"{args.text}: no sentence uses only the {args.vocab} most frequent "
                            "words; raise --vocab")
    lm = estimate(sentences, config)
    lm.write(args.out)
    print(f"{args.out}: {config.order}-gram Kneser-Ney LM, "
          + ", ".join(f"{len(g)} {n}-grams" for n, g in enumerate(lm.ngrams, 1)))
    return 0


def _lm_mix(args: argparse.Namespace) -> int:
    from speechlab.text.ngram import interpolate, read_arpa

    mixed = interpolate(read_arpa(args.first), read_arpa(args.second), args.weight)
    mixed.write(args.out)
    print(f"{args.out}: {args.weight:g} x {args.first} + {1 - args.weight:g} x {args.second}, "
          + ", ".join(f"{len(g)} {n}-grams" for n, g in enumerate(mixed.ngrams, 1)))
    return 0


def _graph(args: argparse.Namespace) -> int:
    import kaldifst

    from speechlab.asr.ctc import graphs
    from speechlab.asr.ctc import topology as topo_mod
    from speechlab.text.lexicon import Lexicon
    from speechlab.text.ngram import read_arpa

    name = topo_mod.get(args.topology).name
    out = Path(args.out)
    lexicon = Lexicon.read(args.lexicon)
    phones = None
    if args.phones is not None:
        phones = [p for p in _read_text(args.phones, None)]
        for lineno, p in enumerate(phones, 1):
            if len(p.split()) != 1:
                raise DataError(f"{args.phones}:{lineno}: expected one phone per line, got {p!r}")
    arpa = read_arpa(args.lm)  # validated here: a broken line is named before any work
    lm_words = [w for w in arpa.vocab if w not in ("<s>", "</s>")]
    missing = [w for w in lm_words if w not in lexicon]
    if missing and args.missing == "error":
        raise DataError(f"{args.lm}: {len(missing)} LM word(s) have no pronunciation in "
                        f"{args.lexicon}, e.g. {missing[:5]}; add them or pass --missing skip")
    lex = lexicon.subset(lm_words)
    if len(lex) == 0:
        raise DataError(f"{args.lm}: none of the LM's {len(lm_words)} words is in "
                        f"{args.lexicon}")
    phone_set = phones if phones is not None else lexicon.phones
    if len(phone_set) > topo_mod.MAX_PHONES:
        raise DataError(f"{args.phones if phones is not None else args.lexicon}: "
                        f"{len(phone_set)} phones, at most {topo_mod.MAX_PHONES} "
                        f"({topo_mod.MAX_PHONES_WHY}); check the file")
    lang = graphs.make_lang(lex, phone_set)
    graph = graphs.decoding_graph(name, lang, graphs.grammar_fst(args.lm, lang, "skip"),
                                  args.recipe)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        graph.fst.write(str(tmp / "graph.fst"))
        (tmp / "words.txt").write_text(lang.word_table(), encoding="utf-8")
        (tmp / "phones.txt").write_text(lang.phone_table(), encoding="utf-8")
        (tmp / "graph.json").write_text(json.dumps({
            "topology": name, "recipe": graph.recipe, "num_tokens": graph.num_tokens,
            "phones": lang.num_phones, "words": lang.num_words, "lm": str(args.lm),
            "lexicon": str(args.lexicon), "skipped_lm_words": len(missing),
            "kaldifst": kaldifst.__version__, **graph.info}, indent=1) + "\n", encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if missing:
        print(f"skipped {len(missing)} of {len(lm_words)} LM words without a pronunciation, "
              f"e.g. {missing[:5]}")
    print(f"{out}: T∘L∘G for {name} ({graph.recipe} recipe), {graph.info['states']} states, "
          f"{graph.info['arcs']} arcs, {graph.num_tokens} network outputs, {lang.num_words} words")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    from speechlab.asr.ctc import topology as topo_mod
    from speechlab.text.ngram import MAX_ORDER, MAX_ORDER_WHY

    csub = command_group(sub, "ctc", "CTC topologies: token FSTs, n-gram LMs, decoding graphs")

    t = csub.add_parser("topology", help="print a topology's token FST for N phones")
    t.add_argument("name", help="S1-T1, S2-T1, S2-T1*, S2-T2*, S2-T2, S3-T2, S3-T2*, S3-T2**")
    t.add_argument("--phones", default=2, help="number of phones",
                   type=bounded(int, ge=1, le=topo_mod.MAX_PHONES, why=topo_mod.MAX_PHONES_WHY))
    t.set_defaults(func=_topology)

    m = csub.add_parser("lm", help="Kneser-Ney n-gram LM of a text file (one sentence per line), "
                        "written as ARPA")
    m.add_argument("text", type=Path)
    m.add_argument("--out", type=Path, required=True, help="the ARPA file to write")
    m.add_argument("--order", type=bounded(int, ge=1, le=MAX_ORDER, why=MAX_ORDER_WHY),
                   default=3)
    m.add_argument("--vocab", type=bounded(int, ge=1), default=None,
                   help="keep only sentences whose words are all among the N most frequent")
    m.add_argument("--language", default=None,
                   help="normalize each line as speechlab does for this language (en, hi, ...)")
    m.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    m.set_defaults(func=_lm, outputs={"out": "file"})

    x = csub.add_parser("lm-mix", help="two ARPA LMs mixed into one (static interpolation: "
                        "WEIGHT x FIRST + (1 - WEIGHT) x SECOND, the union of their words)")
    x.add_argument("first", type=Path, help="ARPA file (plain or gzip-compressed)")
    x.add_argument("second", type=Path, help="ARPA file (plain or gzip-compressed)")
    x.add_argument("--weight", type=bounded(float, gt=0, lt=1), default=0.5,
                   help="the first LM's share (default 0.5)")
    x.add_argument("--out", type=Path, required=True, help="the ARPA file to write")
    x.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    x.set_defaults(func=_lm_mix, outputs={"out": "file"})

    g = csub.add_parser("graph", help="the decoding graph T∘(L∘G) of a topology, a lexicon and "
                        "an ARPA LM (OpenFst files)")
    g.add_argument("--topology", required=True)
    g.add_argument("--lexicon", type=Path, required=True, help="Kaldi lexicon.txt")
    g.add_argument("--lm", type=Path, required=True, help="ARPA file")
    g.add_argument("--out", type=Path, required=True, help="directory to write")
    g.add_argument("--phones", type=Path, default=None,
                   help="phone list, one per line, in the network's output order (id = line); "
                        "default: the lexicon's phones, sorted")
    g.add_argument("--missing", choices=("skip", "error"), default="skip",
                   help="LM words without a pronunciation: leave them out (counted) or fail")
    g.add_argument("--recipe", choices=("full", "lg", "none"), default="full",
                   help="what is determinized and minimized (docs/topologies.md)")
    g.add_argument("--overwrite", action="store_true",
                   help="replace an existing (non-empty) --out directory")
    g.set_defaults(func=_graph, outputs={"out": "dir"})
