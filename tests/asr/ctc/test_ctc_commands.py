"""`speechlab ctc lm`, `ctc graph`, `ctc topology`: files in, a graph a Kaldi decoder reads out;
planted emissions that spell a word decode to that word through the written graph."""

from __future__ import annotations

import json

import numpy as np

from speechlab.cli import main


def _spell(phone_ids: list[int], num_tokens: int, frames_per_phone: int = 3) -> np.ndarray:
    """S1-T1 log-probs: each phone for a few frames, blank between phones."""
    rows = []
    for p in phone_ids:
        rows += [p] * frames_per_phone + [0]
    x = np.full((len(rows), num_tokens), np.log(0.01 / (num_tokens - 1)), np.float32)
    x[np.arange(len(rows)), rows] = np.log(0.99)
    return x


def test_lm_then_graph_then_decode_planted_words(tmp_path, capsys):
    import kaldifst

    from speechlab.asr.ctc.decode import ViterbiDecoder

    (tmp_path / "text.txt").write_text("The cat sat\nthe dog sat\na cat ran\n", encoding="utf-8")
    (tmp_path / "lex.txt").write_text("the dh ah\ncat k ae t\nsat s ae t\ndog d ao g\na ah\n"
                                      "ran r ae n\n", encoding="utf-8")
    assert main(["ctc", "lm", str(tmp_path / "text.txt"), "--out", str(tmp_path / "lm.arpa"),
                 "--order", "2", "--language", "en"]) == 0
    assert "\tthe\t" in (tmp_path / "lm.arpa").read_text()  # normalized to lower case
    assert main(["ctc", "graph", "--topology", "S1-T1", "--lexicon", str(tmp_path / "lex.txt"),
                 "--lm", str(tmp_path / "lm.arpa"), "--out", str(tmp_path / "g")]) == 0
    meta = json.loads((tmp_path / "g" / "graph.json").read_text())
    assert meta["topology"] == "S1-T1" and meta["words"] == 6 and meta["skipped_lm_words"] == 0
    phones = dict(l.split() for l in (tmp_path / "g" / "phones.txt").read_text().splitlines())
    words = {int(i): w for w, i in (l.split() for l in
                                    (tmp_path / "g" / "words.txt").read_text().splitlines())}
    fst = kaldifst.StdVectorFst.read(str(tmp_path / "g" / "graph.fst"))
    decoder = ViterbiDecoder(fst, meta["num_tokens"])
    ids = [int(phones[p]) for p in "dh ah d ao g s ae t".split()]
    best = decoder.decode(_spell(ids, meta["num_tokens"]))
    assert [words[w] for w in best.words] == ["the", "dog", "sat"]
    # No leftovers of the atomic write next to the graph.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g", "lex.txt", "lm.arpa", "text.txt"]


def test_topology_prints_the_token_fst(capsys):
    assert main(["ctc", "topology", "S2-T2*", "--phones", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("S2-T2★: 1 phone(s), 3 network outputs, 3 states, 7 arcs")


def test_a_lexiconp_builds_the_graph_of_its_lexicon(tmp_path):
    """Kaldi's lexiconp.txt (word prob phones...) is read as such, found by its first line's
    number whatever the file's name: its probabilities never become phones."""
    from speechlab.text.lexicon import Lexicon

    lexicon = "cat k ae t\ncat k a t\ndog d ao g\n"
    (tmp_path / "lexicon.txt").write_text(lexicon, encoding="utf-8")
    (tmp_path / "lexiconp.txt").write_text("cat 1.0 k ae t\ncat 0.5 k a t\ndog 1 d ao g\n",
                                           encoding="utf-8")
    (tmp_path / "probs.txt").write_text("\ufeffcat 1.0 k ae t\ncat 0.5 k a t\ndog 1 d ao g\n",
                                        encoding="utf-8")
    plain = Lexicon.read(tmp_path / "lexicon.txt")
    for name in ("lexiconp.txt", "probs.txt"):
        lex = Lexicon.read(tmp_path / name)
        assert lex.phones == plain.phones == ("a", "ae", "ao", "d", "g", "k", "t")
        assert list(lex.items()) == list(plain.items())
