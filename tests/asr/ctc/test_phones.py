"""Phone tokenizers: transcripts to phone ids through a lexicon, missing words named."""

from __future__ import annotations

import pytest

from speechlab.asr.ctc.phones import PhoneTokenizer, lexicon_for
from speechlab.errors import DataError
from speechlab.text.lexicon import Lexicon


def test_words_become_the_phones_of_their_first_pronunciation(tmp_path):
    lex = Lexicon({"the": [["DH", "AH"], ["DH", "IY"]], "cat": [["K", "AE", "T"]]})
    tok = PhoneTokenizer(lex, "en")
    ids = tok.encode("The cat")
    assert tok.decode(ids) == "DH AH K AE T"
    assert sorted(ids) == sorted(tok.phones.index(p) + 1 for p in ["DH", "AH", "K", "AE", "T"])
    with pytest.raises(DataError, match=r"utterance 'u7'.*'dog' is not in the en lexicon"):
        tok.encode("the dog", utt="u7")
    tok.save(tmp_path / "en.json")
    back = PhoneTokenizer.load(tmp_path / "en.json")
    assert back.phones == tok.phones and back.encode("the cat") == ids
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(DataError, match="not a phone tokenizer file"):
        PhoneTokenizer.load(tmp_path / "bad.json")


@pytest.mark.needs_espeak
def test_cmudict_for_english():
    lex = lexicon_for("en", ["cat", "zzzqx"])
    assert lex["cat"] == [("K", "AE", "T")]
    assert "zzzqx" in lex  # not in CMUdict: espeak spells it, in ARPAbet
    with pytest.raises(DataError, match="no pronunciation source"):
        lexicon_for("xx", ["a"])


@pytest.mark.needs_espeak
def test_english_words_cmudict_lacks_get_arpabet_from_espeak():
    from speechlab.asr.ctc.phones import english_lexicon
    from speechlab.text.lexicon import cmudict_lexicon

    lex = english_lexicon(["hello", "checkbox", "runtime"])
    assert lex["hello"] == cmudict_lexicon(["hello"])["hello"]  # CMUdict first
    arpabet = set(cmudict_lexicon().phones)
    for w in ("checkbox", "runtime"):
        assert "checkbox" not in cmudict_lexicon(["checkbox"])
        (pron,) = lex[w]
        assert set(pron) <= arpabet, pron
    assert lex["checkbox"][0] == ("CH", "EH", "K", "B", "AA", "K", "S")
