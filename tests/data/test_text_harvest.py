"""Text harvest: cleaning rules on planted strings, the .mo/.ftl/.properties readers against
independent references (GNU msgfmt, Python's gettext), the cache and the word-list top-up."""

from __future__ import annotations

import gettext
import json
import shutil
import subprocess

import pytest

from speechlab.data import text_harvest as th
from speechlab.data.text_harvest import (
    Sentence,
    clean_ui_string,
    in_script,
    is_usable_sentence,
    member_language,
    read_ftl,
    read_mo,
    read_properties,
    sentence_key,
)
from speechlab.errors import DataError, MissingToolError


@pytest.mark.parametrize("raw, clean", [
    ("_Open the selected file…", "Open the selected file"),
    ("खोलें फ़ाइल को (_O)", "खोलें फ़ाइल को"),
    ("<b>Save</b> the ~document now", "Save the document now"),
    ("&Quit the application", "Quit the application"),
    ("Find &amp; Replace text", "Find & Replace text"),
    ("Filter  <i>navigator</i> .", "Filter navigator."),
    ("soft\u00adhyphen and\u200e marks", "softhyphen and marks"),
])
def test_clean_ui_string(raw, clean):
    assert clean_ui_string(raw) == clean


@pytest.mark.parametrize("text, lang, ok", [
    ("Open the selected file.", "en", True),
    ("Could not open %s for reading", "en", False),  # placeholder
    ("Delete {0} items from the list", "en", False),
    ("Hello $name, welcome back", "en", False),
    ("Page 3 of the document", "en", False),  # digit
    ("Find & Replace text", "en", False),  # symbol
    ("Visit http example com", "en", False),
    ("Open file", "en", False),  # two words
    (" ".join(["word"] * 26), "en", False),
    (" ".join(["word"] * 25), "en", True),
    ("Überprüfen Sie die Datei", "en", False),  # non-ASCII Latin
    ("फ़ाइल को खोलें।", "hi", True),
    ("फ़ाइल को खोलें File", "hi", False),  # mixed script
    ("पृष्ठ ३ का दस्तावेज़", "hi", False),  # Devanagari digit
    ("கோப்பை திறக்க முடியவில்லை", "ta", True),
    ("கோப்பை திறக்க முடியவில்லை", "hi", False),  # right sentence, wrong script
    ("ફાઇલ ખોલી શકાતી નથી", "gu", True),
    ("ફાઇલ ખોલી શકાતી नहीं", "gu", False),  # one Devanagari word
])
def test_is_usable_sentence(text, lang, ok):
    assert is_usable_sentence(text, lang) is ok


def test_in_script_joiners():
    assert in_script("क्\u200dष", "hi")  # ZWJ inside an Indic word is fine
    assert not in_script("a\u200db", "en")


def test_sentence_key_ignores_case_and_punctuation():
    assert sentence_key("Open the file.") == sentence_key("open  the FILE")
    assert sentence_key("फ़ाइल खोलें।") == sentence_key("फ़ाइल खोलें")
    assert sentence_key("Open the file") != sentence_key("Open a file")


PO = r'''
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\n"

msgid "Open the file"
msgstr "फ़ाइल खोलें"

msgctxt "menu"
msgid "Save"
msgstr "सहेजें"

msgid "One file"
msgid_plural "%d files"
msgstr[0] "एक फ़ाइल"
msgstr[1] "%d फ़ाइलें"

msgid "Untranslated"
msgstr ""
'''


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="needs GNU gettext's msgfmt")
def test_read_mo_against_msgfmt_and_python_gettext(tmp_path):
    (tmp_path / "x.po").write_text(PO, encoding="utf-8")
    subprocess.run(["msgfmt", "-o", str(tmp_path / "x.mo"), str(tmp_path / "x.po")], check=True)
    data = (tmp_path / "x.mo").read_bytes()
    pairs = dict(read_mo(data))
    assert pairs["Open the file"] == "फ़ाइल खोलें"
    assert pairs["Save"] == "सहेजें"  # context dropped
    assert pairs["One file"] == "एक फ़ाइल"  # singular of the plural
    assert "" not in pairs  # header skipped
    # Independent reader: Python's gettext agrees on every translated entry.
    with open(tmp_path / "x.mo", "rb") as f:
        ref = gettext.GNUTranslations(f)
    assert ref.gettext("Open the file") == pairs["Open the file"]
    assert ref.pgettext("menu", "Save") == pairs["Save"]
    assert ref.ngettext("One file", "%d files", 1) == pairs["One file"]


def test_read_mo_rejects_garbage():
    with pytest.raises(DataError, match="bad magic"):
        read_mo(b"\x00" * 64, "junk.mo")
    with pytest.raises(DataError, match="too short"):
        read_mo(b"\xde\x12\x04\x95", "short.mo")


def test_read_ftl_joins_continuations_and_attributes():
    ftl = """# comment
title = पहला संदेश
long =
    पहली पंक्ति
    दूसरी पंक्ति
button =
    .label = बटन का लेबल
-brand = ब्रांड
"""
    assert read_ftl(ftl) == ["पहला संदेश", "पहली पंक्ति दूसरी पंक्ति", "", "बटन का लेबल", "ब्रांड"]


def test_read_properties():
    props = ("# c\na = first value\nb=two;plural forms\nc = line \\\n  continued\n"
             "d = \\u0905\\u0906\n")
    assert read_properties(props) == ["first value", "two", "plural forms", "line continued",
                                      "अआ"]


@pytest.mark.parametrize("path, lang", [
    ("/usr/share/locale/hi/LC_MESSAGES/gtk30.mo", "hi"),
    ("/usr/lib/libreoffice/program/resource/ta/LC_MESSAGES/sw.mo", "ta"),
    ("/usr/share/locale/gu_IN/LC_MESSAGES/x.mo", "gu"),
    ("/usr/lib/firefox-esr/browser/extensions/langpack-gu-IN@firefox-esr.mozilla.org.xpi", "gu"),
    ("/usr/share/libreoffice/help/hi/text/shared/guide/doc_open.html", "hi"),
    ("/usr/share/locale/de/LC_MESSAGES/gtk30.mo", None),
    ("/usr/share/locale/hi/some.mo", None),  # not under LC_MESSAGES
])
def test_member_language(path, lang):
    assert member_language(path) == lang


def test_harvested_sentences_are_clean_real_and_deduplicated(harvested):
    for lang, sentences in harvested.items():
        real = [s for s in sentences if s.is_real]
        assert len(real) >= 5000, (lang, len(real))
        assert all(is_usable_sentence(s.text, lang) for s in sentences), lang
        keys = [sentence_key(s.text) for s in sentences]
        assert len(set(keys)) == len(keys), lang
        assert [s.text for s in sentences] == sorted(s.text for s in sentences)
        # Real sentences name the Debian package they came from.
        assert all(s.source in th.DEBIAN_PACKAGES for s in real)
    # English holds translators' source strings, e.g. GTK's.
    sources = {s.source for s in harvested["en"]}
    assert "libgtk-3-common" in sources


def test_cache_is_used_when_present(tmp_path):
    text_dir = tmp_path / f"text-v{th.HARVEST_VERSION}"
    text_dir.mkdir()
    for lang in th.LANGUAGES:
        (text_dir / f"{lang}.tsv").write_text(f"planted\tplanted sentence for {lang}\n",
                                              encoding="utf-8")
    manifest = {"version": th.HARVEST_VERSION, "languages": {lang: {} for lang in th.LANGUAGES}}
    (text_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    got = th.harvest_sentences(["hi", "ta"], tmp_path)
    assert got == {"hi": [Sentence("planted sentence for hi", "planted")],
                   "ta": [Sentence("planted sentence for ta", "planted")]}


def test_top_up_when_sources_are_missing(tmp_path, monkeypatch):
    def fake_debian(languages, packages=(), work_dir=None):
        found = {lang: [] for lang in th.LANGUAGES}
        found["hi"] = [Sentence("यह एक असली वाक्य है", "libgtk-3-common")]
        return found, {"packages": {}, "missing_packages": list(th.DEBIAN_PACKAGES)}

    monkeypatch.setattr(th, "harvest_debian", fake_debian)
    got = th.harvest_sentences(["hi", "en"], tmp_path, target=40)
    assert len(got["hi"]) == 40 and len(got["en"]) == 40
    assert sum(s.is_real for s in got["hi"]) == 1
    for lang in ("hi", "en"):
        fillers = [s for s in got[lang] if not s.is_real]
        assert all(s.source.startswith("wordlist:") for s in fillers)
        assert all(in_script(s.text, lang) and 3 <= len(s.text.split()) <= 8 for s in fillers)
    prov = th.harvest_provenance(tmp_path)
    assert prov["missing_packages"] == list(th.DEBIAN_PACKAGES)
    assert prov["languages"]["hi"]["real"] == 1
    # Deterministic: a second harvest into another cache gives the same lists.
    again = th.harvest_sentences(["hi", "en"], tmp_path / "other", target=40)
    assert again == got


def test_missing_debian_tool_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(th.shutil, "which", lambda name: None)
    with pytest.raises(MissingToolError, match="apt-get.*'apt'"):
        th.harvest_debian(["hi"], work_dir=tmp_path)
    with pytest.raises(MissingToolError, match="aspell"):
        th.wordlist_strings("ta", 3)


# Two synsets in WordNet's data-file layout (written here): a licence header line, then
# "offset lexfile pos count word ... | gloss" with the examples quoted inside the gloss.
_WORDNET_DATA = (
    b"  1 This header line is not a synset\n"
    b"00001740 03 n 01 kettle 0 000 | a metal pot for boiling water; "
    b"\"she put the kettle on the stove\"; \"the kettle began to whistle loudly\"\n"
    b"00002137 03 n 01 lamp 0 000 | a device that gives light (often electric); "
    b"\"turn off the lamp before you sleep\"; \"a lamp\"; \"she put the kettle on the stove\"\n"
    b"00003000 03 n 01 odd 0 000 | a gloss with 3 digits\n"
)


def test_wordnet_glosses_give_definitions_and_examples():
    got = th.wordnet_glosses(_WORDNET_DATA)
    assert "a metal pot for boiling water" in got
    assert "she put the kettle on the stove" in got
    assert "the kettle began to whistle loudly" in got
    assert "a device that gives light (often electric)" in got
    assert not any("header" in g for g in got)


def test_general_english_is_harvested_once_cleaned_and_cached(tmp_path, monkeypatch):
    calls = []

    def fake_download(packages, dest):
        calls.append(list(packages))
        deb = dest / "wordnet-base_1_all.deb"
        deb.write_bytes(b"")
        return {"wordnet-base": deb}, []

    def fake_members(deb, wanted):
        for name in ("/usr/share/wordnet/data.noun", "/usr/share/wordnet/index.noun"):
            if wanted(name):
                yield name, _WORDNET_DATA

    monkeypatch.setattr(th, "_apt_download", fake_download)
    monkeypatch.setattr(th, "iter_deb_members", fake_members)
    monkeypatch.setattr(th, "_deb_version", lambda deb: "1")
    got = th.general_english(tmp_path)
    texts = [s.text for s in got]
    assert texts == sorted(texts) and len(set(texts)) == len(texts)  # sorted, deduplicated
    assert "she put the kettle on the stove" in texts
    assert "a lamp" not in texts and "a gloss with 3 digits" not in texts  # too short, a digit
    assert all(s.source == "wordnet-base=1" for s in got)
    assert th.general_english(tmp_path) == got and len(calls) == 1  # read from the cache
    assert th.general_english(tmp_path, refresh=True) == got and len(calls) == 2


def test_general_english_names_the_package_it_could_not_have(tmp_path, monkeypatch):
    monkeypatch.setattr(th, "_apt_download", lambda packages, dest: ({}, list(packages)))
    with pytest.raises(DataError, match="wordnet-base"):
        th.general_english(tmp_path)


def test_the_general_text_command_writes_a_sentence_a_line(tmp_path, monkeypatch, capsys):
    from speechlab.cli import main
    from speechlab.data import commands

    planted = [Sentence("she put the kettle on the stove", "wordnet-base=1"),
               Sentence("turn off the lamp before you sleep", "wordnet-base=1")]
    monkeypatch.setattr(commands, "general_english", lambda cache_dir, refresh=False: planted)
    out = tmp_path / "en.txt"
    assert main(["data", "general-text", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8").splitlines() == [s.text for s in planted]
    assert main(["data", "general-text", "--out", str(out)]) == 2  # not replaced
    assert "--overwrite" in capsys.readouterr().err
    assert main(["data", "general-text", "--out", str(out), "--overwrite",
                 "--hold-out", "2"]) == 0
    assert out.read_text(encoding="utf-8").splitlines() == [planted[1].text]
