"""Real, human-written sentences for the embedded corpus, from Debian translation catalogs.

Real Hindi, Tamil and Gujarati speech cannot be had offline, so the corpus is synthesized; the
*text* at least should be real. Debian ships translators' work: gettext catalogs (``.mo``) of
LibreOffice, GTK, GNOME apps, GIMP...; Firefox language packs (Fluent ``.ftl`` and ``.properties``
inside an ``.xpi`` zip); LibreOffice's Hindi help (HTML). The translated strings give the Indic
sentences, the English source strings (gettext msgids, untranslated help paragraphs) the English
ones. Nothing harvested is committed: packages are fetched with ``apt-get download`` at run time,
read straight out of ``dpkg-deb --fsys-tarfile`` (never unpacked to disk) and only the cleaned
sentence lists are kept, in a cache directory (``$SPEECHLAB_CACHE`` or ``~/.cache/speechlab``).

Cleaning keeps a string only if, after markup/accelerator stripping, it is wholly in the target
script (Devanagari for hi, Tamil for ta, Gujarati for gu, ASCII Latin for en), has no digits, no
placeholders or symbols, and has 3-25 words. Strings are deduplicated on a case- and
punctuation-blind key so two splits can never hold "the same" sentence. When the Debian sources
are unavailable (no network, package gone), the lists are topped up with word-list strings
(aspell dictionaries for hi/ta/gu, ``/usr/share/dict/american-english`` for en), marked with a
``wordlist:`` source so the corpus builder uses them only after every real sentence.
"""

from __future__ import annotations

import html
import io
import json
import logging
import os
import random
import re
import shutil
import struct
import subprocess
import tarfile
import tempfile
import unicodedata
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from speechlab.errors import ConfigError, DataError, MissingToolError
from speechlab.files import atomic_path, atomic_write_json, file_lock
from speechlab.text.normalize import sentence_key

log = logging.getLogger(__name__)

LANGUAGES = ("en", "hi", "ta", "gu")

# Bump when cleaning rules or sources change: the cache lives in a directory named after it, so
# an old cache is simply not found rather than silently mixed with new rules.
HARVEST_VERSION = 1

# About this many sentences per language; fewer real ones are topped up from word lists.
TARGET_SENTENCES = 10_000
MIN_WORDS, MAX_WORDS = 3, 25

# Packages read, in order. The first ten are the ones named in the design; the last five add
# ~4k Tamil/Gujarati sentences, without which those two fall short of the target.
DEBIAN_PACKAGES = (
    "libreoffice-l10n-hi",
    "libreoffice-l10n-ta",
    "libreoffice-l10n-gu",
    "libreoffice-help-hi",
    "firefox-esr-l10n-hi-in",
    "firefox-esr-l10n-ta",
    "firefox-esr-l10n-gu-in",
    "libgtk-3-common",
    "gnome-control-center-data",
    "nautilus-data",
    "evolution-common",
    "gimp-data",
    "rhythmbox-data",
    "libglib2.0-data",
    "gedit-common",
)

# Debian package that provides each word list used for top-up, named in MissingToolError.
WORDLIST_PACKAGES = {"en": "wamerican", "hi": "aspell-hi", "ta": "aspell-ta", "gu": "aspell-gu"}


@dataclass(frozen=True)
class Script:
    """A writing system: the code-point blocks its letters and marks must fall in."""

    name: str
    ranges: tuple[tuple[int, int], ...]
    # Zero-width (non-)joiners are legitimate inside Indic words (they select conjunct forms).
    joiners: bool


SCRIPTS: dict[str, Script] = {
    "en": Script("Latin", ((0x41, 0x5A), (0x61, 0x7A)), joiners=False),
    "hi": Script("Devanagari", ((0x0900, 0x097F),), joiners=True),
    "ta": Script("Tamil", ((0x0B80, 0x0BFF),), joiners=True),
    "gu": Script("Gujarati", ((0x0A80, 0x0AFF),), joiners=True),
}

# Punctuation a sentence may carry (it shapes prosody and is harmless to keep in the transcript;
# the text normaliser maps it to word boundaries). Anything else that is not a letter, mark or
# space - %, {}, $, <>, /, @, #, =, digits, symbols - marks a placeholder, a path or markup.
ALLOWED_PUNCT = frozenset(".,;:?!'\"()-\u2013\u2014\u0964\u0965\u2018\u2019\u201c\u201d")
_JOINERS = frozenset("\u200c\u200d")

_TAG = re.compile(r"<[^<>]{0,200}>")
_ENTITY = re.compile(r"&(#\d+|#x[0-9a-fA-F]+|[a-zA-Z]+);")
# "खोलें (_O)", "(~S)", "(&N)": the Latin accelerator that translators append in parentheses.
_PAREN_ACCEL = re.compile(r"\s*\(\s*[_~&]?\s*[A-Za-z0-9]\s*\)")
# "_Open", "~Save", "&Quit": accelerator markers in front of a letter (an "&" that starts an
# entity such as "&amp;" is not one).
_ACCEL = re.compile(r"(?:[_~]|&(?!#?[0-9a-zA-Z]+;))(?=\w)")
_ELLIPSIS = re.compile(r"(\.\.\.|\u2026)")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,;:?!\u0964\u0965])")
_SENTENCE_END = re.compile(r"(?<=[.?!\u0964\u0965])\s+")


@dataclass(frozen=True)
class Sentence:
    """One harvested sentence and where it came from (a Debian package, or ``wordlist:...``)."""

    text: str
    source: str

    @property
    def is_real(self) -> bool:
        return not self.source.startswith("wordlist:")


# --------------------------------------------------------------------------------------------
# Cleaning


def clean_ui_string(s: str) -> str:
    """Strip markup, entities, accelerators and ellipses from one UI string; NFC, one space."""
    s = unicodedata.normalize("NFC", s)
    s = _TAG.sub(" ", s)
    s = _PAREN_ACCEL.sub("", s)
    s = _ACCEL.sub("", s)
    # Entities after accelerators, so that a decoded "&amp;" is not taken for an accelerator;
    # the real ampersand it becomes is then rejected by the sentence filter.
    s = _ENTITY.sub(lambda m: html.unescape(m.group(0)), s)
    s = _ELLIPSIS.sub(" ", s)
    # Soft hyphens, direction marks and other format characters render as nothing; joiners are
    # kept because they change how an Indic word is written.
    s = "".join(ch for ch in s if ch in _JOINERS or unicodedata.category(ch) != "Cf")
    s = " ".join(s.split())
    # Inline markup leaves "Filter navigator ." behind; punctuation hugs its word again.
    return _SPACE_BEFORE_PUNCT.sub(r"\1", s)


def in_script(text: str, language: str) -> bool:
    """True if every letter and combining mark of ``text`` is in ``language``'s script."""
    script = SCRIPTS[language]
    for ch in text:
        cat = unicodedata.category(ch)
        if cat[0] in "LM":
            cp = ord(ch)
            if not any(lo <= cp <= hi for lo, hi in script.ranges):
                return False
        elif ch in _JOINERS and not script.joiners:
            return False
    return True


def words(text: str) -> list[str]:
    """Whitespace tokens that contain at least one letter (a lone dash is not a word)."""
    return [w for w in text.split() if any(unicodedata.category(c)[0] == "L" for c in w)]


def is_usable_sentence(text: str, language: str, min_words: int = MIN_WORDS,
                       max_words: int = MAX_WORDS) -> bool:
    """Whether a cleaned string is a sentence we can speak and transcribe in ``language``.

    Rejects: letters outside the language's script, digits of any script, placeholders and
    symbols (anything not a letter, mark, space, joiner or :data:`ALLOWED_PUNCT`), and strings
    outside ``min_words..max_words`` words.
    """
    if not text or "http" in text.lower():
        return False
    for ch in text:
        cat = unicodedata.category(ch)
        if cat[0] in "LM" or ch == " " or ch in ALLOWED_PUNCT or ch in _JOINERS:
            continue
        return False  # digits (N*), symbols (S*), other punctuation (%, {, /, #...), controls
    if not in_script(text, language):
        return False
    n = len(words(text))
    return min_words <= n <= max_words


def split_sentences(text: str) -> list[str]:
    """Split a paragraph at sentence ends (. ? ! danda) and line breaks."""
    out = []
    for line in text.splitlines():
        out.extend(p for p in _SENTENCE_END.split(line) if p.strip())
    return out


# --------------------------------------------------------------------------------------------
# Readers for the files found inside the packages. Each yields (english, native) candidate
# pairs: a gettext entry gives (msgid, msgstr); Firefox/help text gives the same string for
# both, and the script filter decides which language (if any) it belongs to.

Candidate = tuple[str | None, str | None]


def read_mo(data: bytes, name: str = "<mo>") -> list[tuple[str, str]]:
    """Parse a GNU gettext ``.mo`` catalog into ``(msgid, msgstr)`` pairs.

    Context (``ctx\\x04msgid``) is dropped, plural forms keep their first (singular) variant, and
    the header entry (empty msgid) is skipped.
    """
    if len(data) < 28:
        raise DataError(f"{name}: too short to be a .mo catalog ({len(data)} bytes)")
    magic = struct.unpack("<I", data[:4])[0]
    endian = {0x950412DE: "<", 0xDE120495: ">"}.get(magic)
    if endian is None:
        raise DataError(f"{name}: not a .mo catalog (bad magic number {magic:#x})")
    _rev, n, orig_off, trans_off = struct.unpack(endian + "4I", data[4:20])
    pairs = []
    try:
        for i in range(n):
            o, t = orig_off + 8 * i, trans_off + 8 * i
            olen, opos = struct.unpack(endian + "2I", data[o: o + 8])
            tlen, tpos = struct.unpack(endian + "2I", data[t: t + 8])
            msgid = data[opos: opos + olen].decode("utf-8", "replace")
            msgstr = data[tpos: tpos + tlen].decode("utf-8", "replace")
            msgid = msgid.split("\x04")[-1].split("\x00")[0]
            msgstr = msgstr.split("\x00")[0]
            if msgid:
                pairs.append((msgid, msgstr))
    except struct.error:
        raise DataError(f"{name}: truncated .mo catalog (entry {i} of {n})") from None
    return pairs


def _mo_candidates(data: bytes, name: str) -> Iterator[Candidate]:
    yield from read_mo(data, name)


_FTL_ENTRY = re.compile(r"^(-?[A-Za-z][\w-]*|\s+\.[\w-]+)\s*=\s*(.*)$")


def read_ftl(text: str) -> list[str]:
    """Values of a Fluent (``.ftl``) file: messages and attributes, continuation lines joined."""
    entries: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        m = _FTL_ENTRY.match(line)
        if m:
            current = [m.group(2).strip()]
            entries.append(current)
        elif line.startswith((" ", "\t")) and line.strip() and current is not None:
            current.append(line.strip())
        else:
            current = None  # comment, blank line or junk ends the entry
    return [" ".join(p for p in parts if p) for parts in entries]


def read_properties(text: str) -> list[str]:
    """Values of a Java ``.properties`` file (``\\`` continuations, ``\\uXXXX`` escapes)."""
    values = []
    lines = iter(text.splitlines())
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        while stripped.endswith("\\"):
            stripped = stripped[:-1] + next(lines, "").strip()
        sep = re.search(r"\s*[=:]\s*", stripped)
        if not sep:
            continue
        value = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)),
                       stripped[sep.end():])
        # Firefox plural forms are ";"-separated variants of one message.
        values.extend(v.strip() for v in value.split(";"))
    return values


_XPI_READERS: dict[str, Callable[[str], list[str]]] = {
    ".ftl": read_ftl,
    ".properties": read_properties,
}


def _xpi_candidates(data: bytes, name: str) -> Iterator[Candidate]:
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise DataError(f"{name}: not a zip archive") from None
    for member in sorted(zf.namelist()):
        reader = _XPI_READERS.get(Path(member).suffix)
        if reader is None:
            continue
        for value in reader(zf.read(member).decode("utf-8", "replace")):
            # Firefox catalogs have no English source text inside, only the translation.
            yield None, value


_BLOCK_TAG = re.compile(r"<(?:p|h\d|td|th|li|div|br|title|dt|dd)\b[^>]*>", re.I)
_SCRIPT_STYLE = re.compile(r"<(script|style)\b.*?</\1>", re.I | re.S)


def _html_candidates(data: bytes, name: str) -> Iterator[Candidate]:
    text = _SCRIPT_STYLE.sub(" ", data.decode("utf-8", "replace"))
    for block in _BLOCK_TAG.split(text):
        plain = html.unescape(_TAG.sub(" ", block))
        # Untranslated paragraphs of the Hindi help are the English original: offer both.
        yield plain, plain


MEMBER_READERS: dict[str, Callable[[bytes, str], Iterator[Candidate]]] = {
    ".mo": _mo_candidates,
    ".xpi": _xpi_candidates,
    ".html": _html_candidates,
}

# Locale spellings found in paths (``locale/hi/``, ``resource/ta_IN/``, ``langpack-gu-IN@``).
_LOCALE = re.compile(r"(?:^|[/@-])(hi|ta|gu)(?:[_-]IN)?(?=[/@]|$)")


def member_language(path: str) -> str | None:
    """The Indic language a package member belongs to, from its path, or None."""
    p = path.lower()
    if p.endswith(".xpi"):
        m = re.search(r"langpack-(hi|ta|gu)(?:-in)?@", p)
        return m.group(1) if m else None
    if p.endswith(".mo") and "/lc_messages/" not in p:
        return None
    m = _LOCALE.search(path)
    return m.group(1) if m else None


def candidates_to_sentences(cands: Iterable[Candidate], language: str,
                            source: str) -> Iterator[tuple[str, Sentence]]:
    """Clean, split and filter candidate pairs; yields ``(language, Sentence)``."""
    for english, native in cands:
        for lang, raw in (("en", english), (language, native)):
            if not raw:
                continue
            for part in split_sentences(clean_ui_string(raw)):
                part = clean_ui_string(part)
                if is_usable_sentence(part, lang):
                    yield lang, Sentence(part, source)


# --------------------------------------------------------------------------------------------
# Debian access


def _require_tool(binary: str, package: str) -> str:
    path = shutil.which(binary)
    if path is None:
        raise MissingToolError(
            f"'{binary}' not found; install the Debian package '{package}' "
            f"(apt-get install {package})")
    return path


def _apt_download(packages: list[str], dest: Path) -> tuple[dict[str, Path], list[str]]:
    """``apt-get download`` into ``dest``; returns ({package: deb}, [packages not obtained])."""
    _require_tool("apt-get", "apt")

    def run(pkgs: list[str]) -> bool:
        r = subprocess.run(["apt-get", "download", "-q", *pkgs], cwd=dest,
                           capture_output=True, text=True)
        if r.returncode != 0:
            log.debug("apt-get download %s failed: %s", pkgs, r.stderr.strip()[-500:])
        return r.returncode == 0

    # One call for all (fast); on failure retry after refreshing the lists if we may, then one
    # package at a time so one vanished package does not cost all the others.
    if not run(packages):
        if os.geteuid() == 0:
            log.info("apt-get download failed; running apt-get update")
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True)
        if not run(packages):
            for p in packages:
                run([p])
    debs: dict[str, Path] = {}
    for deb in dest.glob("*.deb"):
        debs[deb.name.split("_")[0]] = deb
    missing = [p for p in packages if p not in debs]
    return debs, missing


def _deb_version(deb: Path) -> str:
    r = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True)
    return r.stdout.strip()


def iter_deb_members(deb: Path, wanted: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    """Stream the data tarball of ``deb`` and yield ``(path, bytes)`` of members ``wanted``."""
    _require_tool("dpkg-deb", "dpkg")
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
            for member in tar:
                name = member.name.lstrip(".")
                if member.isfile() and wanted(name):
                    f = tar.extractfile(member)
                    if f is not None:
                        yield name, f.read()
    except tarfile.TarError as e:
        raise DataError(f"{deb}: unreadable package archive ({e})") from None
    finally:
        proc.stdout.close()
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        if proc.wait() != 0:
            raise DataError(f"{deb}: dpkg-deb could not read it: {err.strip()}")


def _wanted_member(languages: set[str]) -> Callable[[str], bool]:
    def wanted(name: str) -> bool:
        suffix = Path(name).suffix
        return suffix in MEMBER_READERS and member_language(name) in languages

    return wanted


def harvest_debian(languages: Iterable[str] = LANGUAGES,
                   packages: Iterable[str] = DEBIAN_PACKAGES,
                   work_dir: Path | None = None) -> tuple[dict[str, list[Sentence]], dict]:
    """Download and read the Debian sources; returns (sentences per language, provenance).

    Provenance records each package's version and the packages that could not be had. Raises
    :class:`MissingToolError` if apt-get/dpkg-deb are missing.
    """
    languages = list(languages)
    indic = {lang for lang in languages if lang != "en"}
    found: dict[str, list[Sentence]] = {lang: [] for lang in languages}
    with tempfile.TemporaryDirectory(prefix="harvest-", dir=work_dir) as tmp:
        tmp_path = Path(tmp)
        # apt drops privileges to _apt for downloads; let it write here.
        tmp_path.chmod(0o777)
        debs, missing = _apt_download(list(packages), tmp_path)
        versions = {}
        for pkg in packages:
            deb = debs.get(pkg)
            if deb is None:
                continue
            versions[pkg] = _deb_version(deb)
            # English comes from msgids and untranslated help of any Indic catalog, so members
            # are read for every Indic language even when only "en" was asked for.
            read_langs = indic or {"hi", "ta", "gu"}
            for name, data in iter_deb_members(deb, _wanted_member(read_langs)):
                member_lang = member_language(name)
                assert member_lang is not None
                reader = MEMBER_READERS[Path(name).suffix]
                for lang, sent in candidates_to_sentences(reader(data, f"{pkg}:{name}"),
                                                          member_lang, pkg):
                    if lang in found:
                        found[lang].append(sent)
    if missing:
        log.warning("could not download Debian packages %s; their text is missing", missing)
    return found, {"packages": versions, "missing_packages": missing}


# --------------------------------------------------------------------------------------------
# Word-list top-up


def _aspell_words(language: str) -> list[str]:
    _require_tool("aspell", "aspell")
    dump = subprocess.run(["aspell", "-d", language, "dump", "master"], capture_output=True)
    if dump.returncode != 0:
        pkg = WORDLIST_PACKAGES[language]
        raise MissingToolError(f"aspell has no '{language}' dictionary; install the Debian "
                               f"package '{pkg}' (apt-get install {pkg})")
    expanded = subprocess.run(["aspell", "-l", language, "expand"], input=dump.stdout,
                              capture_output=True)
    return expanded.stdout.decode("utf-8", "replace").split()


def _dict_words(language: str) -> list[str]:
    path = Path("/usr/share/dict/american-english")
    if not path.exists():
        raise MissingToolError(f"{path} not found; install the Debian package 'wamerican'")
    return path.read_text(encoding="utf-8", errors="replace").split()


_WORDLIST_READERS: dict[str, Callable[[str], list[str]]] = {
    "en": _dict_words,
    "hi": _aspell_words,
    "ta": _aspell_words,
    "gu": _aspell_words,
}


def wordlist_strings(language: str, count: int, seed: int = 0) -> list[Sentence]:
    """``count`` strings of 3-8 random dictionary words, every word wholly in the script."""
    vocab = sorted({w for w in _WORDLIST_READERS[language](language)
                    if w.isalpha() and in_script(w, language)})
    if not vocab:
        raise DataError(f"the {language!r} word list is empty; reinstall "
                        f"{WORDLIST_PACKAGES[language]}")
    rng = random.Random(f"wordlist-{language}-{seed}")
    source = f"wordlist:{WORDLIST_PACKAGES[language]}"
    return [Sentence(" ".join(rng.choice(vocab) for _ in range(rng.randint(3, 8))), source)
            for _ in range(count)]


# --------------------------------------------------------------------------------------------
# Cache


def default_cache_dir() -> Path:
    """``$SPEECHLAB_CACHE`` or ``~/.cache/speechlab``."""
    env = os.environ.get("SPEECHLAB_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "speechlab"


def _text_dir(cache_dir: Path | None) -> Path:
    return (Path(cache_dir) if cache_dir else default_cache_dir()) / f"text-v{HARVEST_VERSION}"


def _dedup_sorted(sentences: Iterable[Sentence]) -> list[Sentence]:
    """Sort by text (deterministic order) and keep the first sentence of each key."""
    seen: set[str] = set()
    out = []
    for s in sorted(sentences, key=lambda s: (s.text, s.source)):
        k = sentence_key(s.text)
        if k and k not in seen:
            seen.add(k)
            out.append(s)
    return out


def _write_list(path: Path, sentences: list[Sentence]) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text("".join(f"{s.source}\t{s.text}\n" for s in sentences), encoding="utf-8")


def _read_list(path: Path) -> list[Sentence]:
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        source, sep, text = line.partition("\t")
        if not sep:
            raise DataError(f"{path}:{i}: corrupt sentence cache; delete {path.parent} to rebuild")
        out.append(Sentence(text, source))
    return out


def check_languages(languages: Sequence[str], key: str = "languages") -> None:
    """ConfigError naming the recipe ``key`` unless ``languages`` is a non-empty list of
    distinct languages speechlab has text, voices and normalization for. Recipes call it when
    loaded, so a typo is refused before a corpus is built or a feature computed."""
    if not languages:
        raise ConfigError(f"{key}: give at least one language, e.g. [{LANGUAGES[0]}]")
    repeated = sorted({lang for lang in languages if list(languages).count(lang) > 1})
    if repeated:
        raise ConfigError(f"{key}: language(s) {repeated} given more than once")
    unknown = [lang for lang in languages if lang not in SCRIPTS]
    if unknown:
        raise ConfigError(f"{key}: unknown language(s) {unknown}; known: {list(SCRIPTS)}")


def harvest_sentences(languages: Iterable[str] = LANGUAGES, cache_dir: Path | None = None,
                      *, refresh: bool = False,
                      target: int = TARGET_SENTENCES) -> dict[str, list[Sentence]]:
    """Cleaned sentences per language, from the cache or harvested now (then cached).

    Args:
        languages: subset of :data:`LANGUAGES`.
        cache_dir: root of the cache (default :func:`default_cache_dir`).
        refresh: harvest again even if cached.
        target: top a language up with word-list strings to this many sentences.

    Returns:
        ``{language: [Sentence, ...]}`` in a deterministic order (sorted by text, real
        sentences and word-list strings interleaved as sorted; filter on ``is_real``).
    """
    languages = list(languages)
    unknown = [lang for lang in languages if lang not in SCRIPTS]
    if unknown:
        raise DataError(f"unknown language(s) {unknown}; known: {list(SCRIPTS)}")
    text_dir = _text_dir(cache_dir)
    manifest_path = text_dir / "manifest.json"
    with file_lock(text_dir.with_name(text_dir.name + ".lock")):
        manifest = {}
        if manifest_path.exists() and not refresh:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        cached = set(manifest.get("languages", {}))
        todo = [lang for lang in LANGUAGES if lang in languages and lang not in cached]
        if todo:
            # Harvest every language at once: the downloads are shared, and English needs the
            # Indic catalogs anyway. The manifest is written last, so a crash leaves a cache
            # that is simply rebuilt on the next call.
            log.info("harvesting sentences from Debian translation catalogs into %s", text_dir)
            found, provenance = harvest_debian(LANGUAGES, work_dir=_mkdir(text_dir))
            langs_info = {}
            for lang in LANGUAGES:
                real = _dedup_sorted(found[lang])
                sentences = real
                if len(real) < target:
                    log.warning("%s: only %d real sentences; topping up with word-list strings",
                                lang, len(real))
                    sentences = _dedup_sorted(real + wordlist_strings(lang, target - len(real)))
                _write_list(text_dir / f"{lang}.tsv", sentences)
                sources: dict[str, int] = {}
                for s in sentences:
                    sources[s.source] = sources.get(s.source, 0) + 1
                langs_info[lang] = {"sentences": len(sentences), "real": len(real),
                                    "sources": dict(sorted(sources.items()))}
            manifest = {"version": HARVEST_VERSION, "languages": langs_info, **provenance}
            atomic_write_json(manifest_path, manifest)
        return {lang: _read_list(text_dir / f"{lang}.tsv") for lang in languages}


# --------------------------------------------------------------------------------------------
# General English for language models

#: The Debian package of :func:`general_english`: WordNet's database, whose glosses hold
#: definitions and example sentences of everyday English.
GENERAL_ENGLISH_PACKAGE = "wordnet-base"
_WORDNET_FILES = ("data.adj", "data.adv", "data.noun", "data.verb")
_QUOTED = re.compile(r'"([^"]+)"')


def wordnet_glosses(data: bytes) -> list[str]:
    """The strings of a WordNet data file's glosses (``data.noun``...; the text after ``|`` on
    each synset's line): its example sentences (quoted) and its definitions (the rest, split at
    ``;``). The licence header (lines starting with a space) is skipped."""
    out: list[str] = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        if not line or line[0].isspace():
            continue
        _, sep, gloss = line.partition(" | ")
        if not sep:
            continue
        out += [q.strip() for q in _QUOTED.findall(gloss)]
        out += [d.strip() for d in _QUOTED.sub(";", gloss).split(";") if d.strip()]
    return out


def general_english(cache_dir: Path | None = None, *, refresh: bool = False) -> list[Sentence]:
    """Everyday English for word language models, not for the audio corpus (whose English is
    software text, :func:`harvest_sentences`): WordNet's example sentences and definitions
    (Debian :data:`GENERAL_ENGLISH_PACKAGE`, downloaded once with ``apt-get download`` and
    cached as ``general-v1/en.tsv`` beside the corpus text), cleaned and deduplicated as the
    corpus sentences are, in sorted order. Raises :class:`DataError` when the package cannot
    be had."""
    text_dir = _text_dir(cache_dir).with_name(f"general-v{HARVEST_VERSION}")
    path = text_dir / "en.tsv"
    with file_lock(text_dir.with_name(text_dir.name + ".lock")):
        if path.exists() and not refresh:
            return _read_list(path)
        found: list[Sentence] = []
        with tempfile.TemporaryDirectory(prefix="general-", dir=_mkdir(text_dir)) as tmp:
            tmp_path = Path(tmp)
            tmp_path.chmod(0o777)  # apt downloads as _apt
            debs, missing = _apt_download([GENERAL_ENGLISH_PACKAGE], tmp_path)
            if missing:
                raise DataError(f"could not download the Debian package "
                                f"{GENERAL_ENGLISH_PACKAGE} (no apt lists or no network to "
                                "its mirror?); general English comes from it")
            source = f"{GENERAL_ENGLISH_PACKAGE}={_deb_version(debs[GENERAL_ENGLISH_PACKAGE])}"
            for name, data in iter_deb_members(debs[GENERAL_ENGLISH_PACKAGE],
                                               lambda n: Path(n).name in _WORDNET_FILES):
                for text in wordnet_glosses(data):
                    text = clean_ui_string(text).strip(" \"'`")
                    if is_usable_sentence(text, "en") and text.count("(") == text.count(")"):
                        found.append(Sentence(text, source))
        sentences = _dedup_sorted(found)
        _write_list(path, sentences)
        return sentences


def harvest_provenance(cache_dir: Path | None = None) -> dict:
    """The cache manifest: package versions, missing packages, counts per language and source."""
    path = _text_dir(cache_dir) / "manifest.json"
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p
