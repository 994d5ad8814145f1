"""Every bad input and fault, through the console script: exit 2, one line, nothing left behind.

Each row of :data:`CASES` is one bad input: a setup that makes it in an empty directory, the
command line, and what the error line must name. The test runs the command in-process (as
``speechlab`` would, with log lines shown on stderr) and checks that it exits 2, that stderr is
exactly one line ``speechlab: error: ...`` naming the item, with no traceback, and that the
directory is byte for byte as the setup left it: no half-written file, no new directory, no
input changed. A few rows also run as a real subprocess.

A new paper adds its rows here (its commands' bad options, bad inputs and side files).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from speechlab.cli import main
from speechlab.testing.audio import nonfinite_wav, tone_cut
from speechlab.testing.files import snapshot
from speechlab.testing.rnnt import untrained_run

# ---------------------------------------------------------------------------------------------
# What a setup can make


class Env:
    """The case's directory and helpers for its setup; undoes read-only directories after."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._locked: list[Path] = []

    def __truediv__(self, name: str) -> Path:
        return self.root / name

    def text(self, name: str, content: str) -> Path:
        p = self.root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content, encoding="utf-8")
        return p

    def tone(self, name: str = "tone.wav", seconds: float = 1.0) -> Path:
        tone_cut(self.root / name, duration=seconds)
        return self.root / name

    def kaldi(self, name: str = "kaldi", wavs: dict[str, str] | None = None) -> Path:
        """A Kaldi data dir; ``wavs`` maps utterance id -> wav.scp value (default: one tone)."""
        d = self.root / name
        d.mkdir(parents=True, exist_ok=True)
        wavs = wavs or {"u1": str(self.tone(f"{name}-u1.wav"))}
        (d / "wav.scp").write_text("".join(f"{u} {v}\n" for u, v in wavs.items()))
        (d / "text").write_text("".join(f"{u} hello world\n" for u in wavs))
        (d / "utt2spk").write_text("".join(f"{u} spk\n" for u in wavs))
        (d / "utt2lang").write_text("".join(f"{u} en\n" for u in wavs))
        return d

    def corpus(self, name: str = "corpus") -> Path:
        """A corpus directory holding an imported ``train`` split."""
        main(["data", "import-kaldi", str(self.kaldi(f"{name}-src")), "--out",
              str(self.root / name), "--split", "train"])
        return self.root / name

    def run_dir(self, variant: str = "multisoftmax_lid") -> Path:
        return untrained_run(self.root / "run", variant)

    def read_only(self, name: str) -> Path:
        """A directory nothing can be written into, root included (root ignores permissions:
        the directory is made immutable instead)."""
        d = self.root / name
        d.mkdir(parents=True, exist_ok=True)
        if os.geteuid() != 0:
            d.chmod(0o555)
        elif shutil.which("chattr") is None or subprocess.run(
                ["chattr", "+i", str(d)], capture_output=True).returncode != 0:
            pytest.skip("running as root on a file system without immutable directories: "
                        "no way to make a read-only directory")
        self._locked.append(d)
        try:
            with tempfile.TemporaryFile(dir=d):
                pytest.skip(f"{d} stays writable here")
        except OSError:
            pass
        return d

    def unlock(self) -> None:
        for d in self._locked:
            if os.geteuid() == 0:
                subprocess.run(["chattr", "-i", str(d)], check=False)
            else:
                d.chmod(0o755)


@dataclass(frozen=True)
class Case:
    """One bad input: ``setup`` makes it, ``argv`` is the command line, the one-line error must
    contain ``names`` (``{d}`` is replaced by the case's directory)."""

    id: str
    argv: Callable[[Env], list[str]]
    names: str
    setup: Callable[[Env], object] = lambda env: None
    subprocess: bool = False  # also run as a real `python -m speechlab.cli`


def _score(env: Env, *extra: str) -> list[str]:
    env.text("ref.txt", "u1 a b c\n")
    env.text("hyp.txt", "u1 a b d\n")
    return ["score", "--ref", str(env / "ref.txt"), "--hyp", str(env / "hyp.txt"), *extra]


def _decode(env: Env, *extra: str, model: str = "multisoftmax_lid", wav: str = "tone.wav"
            ) -> list[str]:
    return ["rnnt", "decode", str(env / "run"), model, str(env / wav), *extra]


def _decode_setup(env: Env) -> None:
    env.run_dir()
    env.tone()


def _nan_cuts(env: Env) -> None:
    from lhotse import CutSet

    from speechlab.testing.audio import nonfinite_cut

    CutSet.from_cuts([tone_cut(env / "ok.wav", cut_id="ok"),
                      nonfinite_cut(env / "nan.wav", cut_id="nan-cut")]).to_file(env / "c.jsonl.gz")


def _lhotse_inf(env: Env) -> None:
    from lhotse import Recording, RecordingSet, SupervisionSegment, SupervisionSet

    rec = Recording.from_file(nonfinite_wav(env / "inf.wav", value=np.inf), recording_id="r")
    RecordingSet.from_recordings([rec]).to_file(env / "recs.jsonl.gz")
    SupervisionSet.from_segments([SupervisionSegment("r", "r", 0, 1.0, text="hi", language="en",
                                                     speaker="s")]).to_file(env / "sups.jsonl.gz")


def _piped(env: Env) -> None:
    a, b = env.tone("a.wav"), env.tone("b.wav")
    env.kaldi("kaldi", {"u1": f"sox {a} -t wav - |", "u2": f"sox {b} -t wav - |",
                        "u3": "false |"})


def _resave(path: str, drop: str | None = None, **parts) -> Callable[[Env], None]:
    """Set up a decodable run, then rewrite one checkpoint without ``drop`` / with ``parts``."""
    def setup(env: Env) -> None:
        from speechlab.train.checkpoint import load_checkpoint, save_checkpoint

        _decode_setup(env)
        ckpt = load_checkpoint(env / path)
        ckpt.pop("format_version")
        ckpt.pop(drop, None)
        save_checkpoint(env / path, **{**ckpt, **parts})
    return setup


def _corrupt(path: str, content: bytes = b"{ not json") -> Callable[[Env], None]:
    def setup(env: Env) -> None:
        _decode_setup(env)
        (env / path).write_bytes(content)
    return setup


def _results(env: Env) -> None:
    env.text("runA/results.json", '{"title": "x", "tables": [')


def _w2v_checkpoint(name: str = "w2v.pt", **extra) -> Callable[[Env], None]:
    def setup(env: Env) -> None:
        from speechlab.testing.wav2vec2 import fairseq_checkpoint

        fairseq_checkpoint(env / name, **extra)
        CutSetFile(env)
    return setup


def CutSetFile(env: Env, seconds: float = 0.5) -> None:
    from lhotse import CutSet

    CutSet.from_cuts([tone_cut(env / "short.wav", duration=seconds, cut_id="short")]).to_file(
        env / "cuts.jsonl.gz")


def _diagnose(env: Env, ckpt: str = "w2v.pt", *extra: str) -> list[str]:
    return ["diagnose", "attention", str(env / ckpt), "--cuts", str(env / "cuts.jsonl.gz"),
            "--out", str(env / "diag"), *extra]
def _over_training(env: Env, *extra: str) -> list[str]:
    argv = ["diagnose", "attention-over-training", str(env / "run"), "--cuts",
            str(env / "cuts.jsonl.gz"), "--out", str(env / "over")]
    if "--cuts" in extra:  # another manifest
        i = extra.index("--cuts")
        argv[4], extra = extra[i + 1], extra[:i] + extra[i + 2:]
    return argv + list(extra)


# --- TTS (SALAD paper): wav + HTS label corpora, synthesis
_LAB = "{s} {e} x^x-pau+ow=p@x_x/A:0_0_0/B:x-x-x@x-x&x-x#x-x$x-x!x-x;x-x|x/C:1+1+1"


def _tts_pair(seconds_wav: float, seconds_lab: float, phone: str = "pau",
              rate: int = 16000) -> Callable[[Env], None]:
    def setup(env: Env) -> None:
        tone_cut(env / "wav" / "u1.wav", duration=seconds_wav, sampling_rate=rate)
        env.text("lab/u1.lab", _LAB.format(s=0, e=int(seconds_lab * 1e7)).replace(
            "-pau+", f"-{phone}+") + "\n")
    return setup


def _import_tts(env: Env) -> list[str]:
    return ["data", "import-tts", str(env / "wav"), str(env / "lab"), "--out", str(env / "c")]


CASES: list[Case] = [
    # --- numeric options, refused where they enter, before any work
    Case("score-level-above-1", lambda e: _score(e, "--level", "1.5"), "'level' must be < 1"),
    Case("score-level-nan", lambda e: _score(e, "--level", "nan"), "'level' must be a number"),
    Case("score-negative-resamples", lambda e: _score(e, "--num_resamples", "-5"),
         "'num_resamples' must be >= 0"),
    Case("score-negative-seed", lambda e: _score(e, "--seed", "-1"), "'seed' must be >= 0"),
    Case("train-lr-nan", lambda e: ["reproduce", "multisoftmax", "--scale", "ci", "--out",
                                    str(e / "run"), "--set", "train.optim.lr=nan"],
         "'train.optim.lr' must be a number, got nan", subprocess=True),
    Case("train-lr-negative", lambda e: ["reproduce", "multisoftmax", "--scale", "ci", "--out",
                                         str(e / "run"), "--set", "train.optim.lr=-0.001"],
         "'train.optim.lr' must be > 0"),
    Case("train-max-frames-negative", lambda e: ["reproduce", "multisoftmax", "--scale", "ci",
                                                 "--out", str(e / "run"), "--set",
                                                 "task.max_frames=-1"],
         "'task.max_frames' must be >= 1"),
    Case("decode-beam-zero", lambda e: _decode(e, "--beam", "0"), "--beam must be >= 1",
         _decode_setup),
    Case("decode-beam-nan", lambda e: _decode(e, "--beam", "nan"), "--beam: invalid int value",
         _decode_setup),
    Case("decode-chunk-nan", lambda e: _decode(e, "--chunk-ms", "nan"), "--chunk-ms must be",
         _decode_setup),
    Case("decode-chunk-negative", lambda e: _decode(e, "--chunk-ms", "-300"), "--chunk-ms must",
         _decode_setup),
    Case("decode-tau-negative", lambda e: _decode(e, "--tau", "-1"), "--tau must be >= 0",
         _decode_setup),
    Case("decode-s-th-nan", lambda e: _decode(e, "--s-th", "nan"), "--s-th must be a number",
         _decode_setup),
    Case("decode-unknown-method", lambda e: _decode(e, "--method", "viterbi"),
         "unknown search method 'viterbi'", _decode_setup),
    Case("decode-unknown-language", lambda e: _decode(e, "--language", "fr"),
         "--language 'fr'", _decode_setup),
    Case("fbank-negative-shift", lambda e: ["features", "compute", "--cuts", str(e / "c.jsonl.gz"),
                                            "--out", str(e / "f"), "--frame_shift_ms", "-10"],
         "'frame_shift_ms' must be > 0", _nan_cuts),
    Case("corpus-noise-prob", lambda e: ["data", "make-asr-corpus", "--tiny", "--out",
                                         str(e / "c"), "--noise_prob", "2"],
         "'noise_prob' must be <= 1"),
    Case("corpus-minutes-nan", lambda e: ["data", "make-asr-corpus", "--out", str(e / "c"),
                                          "--minutes", "en=nan"], "'minutes' must be a number"),
    Case("import-sample-rate-zero", lambda e: ["data", "import-kaldi", str(e / "kaldi"), "--out",
                                               str(e / "c"), "--sample_rate", "0"],
         "'sample_rate' must be >= 1", lambda e: e.kaldi()),
    Case("missing-required-option", lambda e: ["score", "--ref", str(e / "ref.txt")],
         "the following arguments are required: --hyp"),
    Case("score-unknown-normalization", lambda e: _score(e, "--normalization", "NFX"),
         "'normalization': 'NFX' is not one of"),
    Case("split-name-not-a-file-name", lambda e: ["data", "import-kaldi", str(e / "kaldi"),
                                                  "--out", str(e / "c"), "--split", "../up"],
         "split name '../up'", lambda e: e.kaldi()),
    Case("hypothesis-file-missing", lambda e: ["score", "--ref", str(e / "ref.txt"), "--hyp",
                                               str(e / "nope.txt")], "{d}/nope.txt: no such file",
         lambda e: e.text("ref.txt", "u1 a\n")),
    Case("decode-unknown-model", lambda e: _decode(e, model="mono_fr"),
         "{d}/run/models/mono_fr: no such model", _decode_setup),
    # --- non-finite audio, refused at import and named by every later stage
    Case("import-kaldi-nan-wav", lambda e: ["data", "import-kaldi", str(e / "kaldi"), "--out",
                                            str(e / "c")], "nan.wav (utterance 'u1'): 100 non-finite",
         lambda e: e.kaldi(wavs={"u1": str(nonfinite_wav(e / "nan.wav"))}), subprocess=True),
    Case("import-lhotse-inf-wav", lambda e: ["data", "import-lhotse", "--recordings",
                                             str(e / "recs.jsonl.gz"), "--supervisions",
                                             str(e / "sups.jsonl.gz"), "--out", str(e / "c"),
                                             "--split", "train"],
         "inf.wav (utterance 'r'): 100 non-finite", _lhotse_inf),
    Case("features-nan-cut", lambda e: ["features", "compute", "--cuts", str(e / "c.jsonl.gz"),
                                        "--out", str(e / "f")], "cut 'nan-cut'", _nan_cuts),
    Case("decode-nan-wav", lambda e: _decode(e, wav="nan.wav"), "nan.wav: 100 non-finite",
         lambda e: (_decode_setup(e), nonfinite_wav(e / "nan.wav"))),
    # float samples of 1e30 overflow the features into NaN: refused like NaN, with the scale
    Case("decode-huge-samples-wav", lambda e: _decode(e, wav="huge.wav"),
         "huge.wav: samples reach 1e+30 in magnitude; audio as floats lies within [-1, 1]",
         lambda e: (_decode_setup(e), nonfinite_wav(e / "huge.wav", value=1e30))),
    Case("import-kaldi-huge-wav", lambda e: ["data", "import-kaldi", str(e / "kaldi"), "--out",
                                             str(e / "c")],
         "huge.wav (utterance 'u1'): samples reach 1e+30 in magnitude",
         lambda e: e.kaldi(wavs={"u1": str(nonfinite_wav(e / "huge.wav", value=1e30))})),
    # --- no command replaces or half-writes data
    Case("import-over-existing-split", lambda e: ["data", "import-kaldi", str(e / "kaldi"),
                                                  "--out", str(e / "corpus"), "--split", "train"],
         "already holds split 'train' (1 utterances", lambda e: (e.corpus(), e.kaldi())),
    Case("build-over-imported-split", lambda e: ["data", "make-asr-corpus", "--tiny", "--out",
                                                 str(e / "corpus")],
         "holds imported split(s) ['train']", lambda e: e.corpus()),
    Case("import-piped-third-fails", lambda e: ["data", "import-kaldi", str(e / "kaldi"),
                                                "--out", str(e / "c")],
         "wav.scp:3 (utterance 'u3'): command failed", _piped),
    # --- operating-system faults: one line naming the path and what to do
    Case("json-into-read-only-dir", lambda e: _score(e, "--json", str(e / "ro" / "s.json")),
         "{d}/ro/s.json", lambda e: e.read_only("ro")),
    Case("cmvn-into-read-only-dir", lambda e: ["features", "cmvn", "--cuts", str(e / "c.jsonl.gz"),
                                               "--out", str(e / "ro" / "cmvn.safetensors")],
         "{d}/ro/cmvn.safetensors", lambda e: (_nan_cuts(e), e.read_only("ro"))),
    Case("import-into-read-only-dir", lambda e: ["data", "import-kaldi", str(e / "kaldi"),
                                                 "--out", str(e / "ro" / "corpus")],
         "{d}/ro/corpus", lambda e: (e.kaldi(), e.read_only("ro"))),
    # --- reproductions and training: checked before anything is written
    Case("reproduce-corpus-not-a-dir", lambda e: ["reproduce", "multisoftmax", "--scale", "ci",
                                                  "--corpus", str(e / "nope"), "--out", str(e / "run")],
         "--corpus {d}/nope: not a directory"),
    Case("reproduce-corpus-without-manifests", lambda e: ["reproduce", "multisoftmax", "--scale",
                                                          "ci", "--corpus", str(e / "c"), "--out",
                                                          str(e / "run")],
         "{d}/c/train_cuts.jsonl.gz is missing", lambda e: (e / "c").mkdir()),
    Case("reproduce-zero-jobs", lambda e: ["reproduce", "multisoftmax", "--scale", "ci", "--jobs",
                                           "0", "--out", str(e / "run")], "--jobs: must be >= 1"),
    Case("reproduce-unknown-scale", lambda e: ["reproduce", "multisoftmax", "--scale", "huge",
                                               "--out", str(e / "run")], "no scale 'huge'"),
    Case("reproduce-bad-recipe-value", lambda e: ["reproduce", "multisoftmax", "--scale", "ci",
                                                  "--set", "mono_steps=-3", "--out", str(e / "run")],
         "mono_steps"),
    Case("train-unknown-model", lambda e: ["train", "multisoftmax", "nonesuch", "--scale", "ci",
                                           "--out", str(e / "run")], "trains no model 'nonesuch'"),
    Case("train-without-its-seed", lambda e: ["train", "multisoftmax", "ft_ms_hi", "--scale", "ci",
                                              "--out", str(e / "run")],
         "ft_ms_hi starts from multisoftmax, which is not trained"),
    Case("training-into-read-only-dir", lambda e: ["reproduce", "multisoftmax", "--scale", "ci",
                                                   "--out", str(e / "ro" / "run")],
         "{d}/ro/run", lambda e: e.read_only("ro")),
    Case("report-into-read-only-dir", lambda e: ["report", str(e / "runA"), "--out",
                                                 str(e / "ro")], "{d}/ro",
         lambda e: (_results(e), e.read_only("ro"))),
    Case("corpus-into-a-file", lambda e: ["data", "import-kaldi", str(e / "kaldi"), "--out",
                                          str(e / "kaldi" / "text")],
         "{d}/kaldi/text is not a directory", lambda e: e.kaldi()),
    Case("output-under-a-file", lambda e: _score(e, "--json", str(e / "ref.txt" / "s.json")),
         "{d}/ref.txt/s.json is not a directory"),
    Case("output-is-a-directory", lambda e: _score(e, "--json", str(e / "out")),
         "{d}/out is a directory", lambda e: (e / "out").mkdir()),
    Case("output-dir-is-a-file", lambda e: ["features", "compute", "--cuts", str(e / "c.jsonl.gz"),
                                            "--out", str(e / "ok.wav")],
         "{d}/ok.wav is not a directory", _nan_cuts),
    Case("input-is-a-directory", lambda e: ["score", "--ref", str(e / "d"), "--hyp", str(e / "d")],
         "{d}/d: is a directory", lambda e: (e / "d").mkdir()),
    Case("cuts-is-a-directory", lambda e: ["features", "compute", "--cuts", str(e / "d"),
                                           "--out", str(e / "f")],
         "{d}/d is a directory", lambda e: (e / "d").mkdir()),
    Case("config-is-a-directory", lambda e: ["reproduce", "multisoftmax", "--config",
                                             str(e / "d"), "--out", str(e / "run")],
         "{d}/d is a directory", lambda e: (e / "d").mkdir()),
    Case("unwritable-system-path", lambda e: _score(e, "--json", "/proc/speechlab/s.json"),
         "/proc/speechlab/s.json"),
    # --- corrupt side files of a trained model or run
    Case("checkpoint-without-model-config", lambda e: _decode(e), "does not say which model",
         _resave("run/models/multisoftmax_lid/ckpt-00000000.pt", drop="model_config")),
    Case("checkpoint-of-another-family", lambda e: _decode(e), "holds a 'toy' model, not an RNN-T",
         _resave("run/models/multisoftmax_lid/ckpt-00000000.pt",
                 model_config={"family": "toy", "config": {}})),
    Case("tokenizer-json-corrupt", lambda e: _decode(e), "run/lang/hi.json is not valid JSON",
         _corrupt("run/lang/hi.json")),
    Case("cmvn-corrupt", lambda e: _decode(e), "run/lang/cmvn.safetensors",
         _corrupt("run/lang/cmvn.safetensors", b"\x00" * 20)),
    Case("tokenizer-of-another-model", lambda e: _decode(e), "run/lang/hi.json: 3 symbols",
         _corrupt("run/lang/hi.json", b'{"type": "grapheme", "language": "hi", "normalize": true,'
                  b' "symbols": ["<blank>", "a", "B_a"]}')),
    Case("checkpoint-corrupt", lambda e: _decode(e), "ckpt-00000000.pt is corrupt",
         _corrupt("run/models/multisoftmax_lid/ckpt-00000000.pt", b"PK\x03\x04 truncated")),
    Case("results-json-corrupt", lambda e: ["report", str(e / "runA"), "--out", str(e / "rep")],
         "runA/results.json:1: corrupt results file", _results),
    Case("corpus-json-corrupt", lambda e: ["data", "info", str(e / "c")],
         "c/corpus.json:1: corrupt corpus summary", lambda e: e.text("c/corpus.json", "{")),
    Case("cuts-given-as-recordings", lambda e: ["data", "import-lhotse", "--recordings",
                                                str(e / "c.jsonl.gz"), "--supervisions",
                                                str(e / "c.jsonl.gz"), "--out", str(e / "o"),
                                                "--split", "x"],
         "c.jsonl.gz: not a lhotse RecordingSet: it holds MonoCut items", _nan_cuts),
    Case("cuts-out-without-suffix", lambda e: ["features", "compute", "--cuts",
                                               str(e / "c.jsonl.gz"), "--out", str(e / "f"),
                                               "--cuts-out", str(e / "f2")],
         "--cuts-out {d}/f2: a manifest file name must end in", _nan_cuts),
    Case("cuts-manifest-corrupt", lambda e: ["features", "compute", "--cuts",
                                             str(e / "bad.jsonl.gz"), "--out", str(e / "f")],
         "bad.jsonl.gz is not a lhotse cuts manifest",
         lambda e: (e / "bad.jsonl.gz").write_bytes(b"\x1f\x8b garbage")),
    # --- wav2vec 2.0: checkpoints, audio, block lists and radii (issue 10)
    Case("w2v-audio-shorter-than-receptive-field", lambda e: _diagnose(e),
         "cut 'short' has 320 samples, shorter than the feature encoder's receptive field (400",
         lambda e: (_w2v_checkpoint()(e), CutSetFile(e, seconds=0.02))),
    Case("w2v-checkpoint-shape-mismatch", lambda e: _diagnose(e, "bad.pt"),
         "tensor 'transformer.blocks.1.feed_forward.fc1.weight' has shape (3, 3)",
         _w2v_checkpoint("bad.pt", tensors={"encoder.layers.1.fc1.weight": __import__("torch").zeros(3, 3)})),
    Case("w2v-not-a-checkpoint", lambda e: _diagnose(e, "notes.pt"),
         "{d}/notes.pt is not a wav2vec 2.0 checkpoint",
         lambda e: (e.text("notes.pt", "not a checkpoint\n"), CutSetFile(e))),
    Case("w2v-diagnose-radius-zero", lambda e: _diagnose(e, "w2v.pt", "--apply", "--radius", "0"),
         "--radius must be >= 1", _w2v_checkpoint()),
    Case("w2v-block-list-malformed", lambda e: ["wav2vec2", "config", "--local-blocks", "2-x",
                                                "--out", str(e / "m.yaml")],
         "block list '2-x': '2-x' is not a block number"),
    Case("w2v-block-list-out-of-range", lambda e: ["wav2vec2", "config", "--local-blocks",
                                                   "6-13", "--out", str(e / "m.yaml")],
         "block(s) 13 out of range: the model has blocks 1-12"),
    Case("w2v-config-radius-zero", lambda e: ["wav2vec2", "config", "--radius", "0", "--out",
                                              str(e / "m.yaml")], "--radius must be >= 1"),
    Case("w2v-reproduce-radius-zero", lambda e: ["reproduce", "local-attention", "--scale", "ci",
                                                 "--out", str(e / "run"), "--set", "radius=0"],
         "'radius' must be >= 1"),
    Case("w2v-reproduce-variant-blocks-out-of-range",
         lambda e: ["reproduce", "local-attention", "--scale", "ci", "--out", str(e / "run"),
                    "--set", "variants={Orig: '', L_B2-12: '2-12'}"],
         "variant 'L_B2-12': block list '2-12': block(s) 3-12 out of range"),
]


def _ctc_graph(env: Env, *extra: str, lexicon: str = "lex.txt", lm: str = "lm.arpa") -> list[str]:
    return ["ctc", "graph", "--topology", "S1-T1", "--lexicon", str(env / lexicon), "--lm",
            str(env / lm), "--out", str(env / "graph"), *extra]


_ARPA = ("\\data\\\nngram 1=4\nngram 2=2\n\n\\1-grams:\n-1.0\t<s>\t-0.3\n-0.5\t</s>\n"
         "-0.4\tcat\t-0.2\n-0.6\tdog\t-0.2\n\n\\2-grams:\n-0.2\t<s> cat\n-0.3\tcat </s>\n"
         "\n\\end\\\n")


def _ctc_files(lexicon: str = "cat k ae t\ndog d ao g\n", arpa: str = _ARPA,
               phones: str | None = None) -> Callable[[Env], None]:
    def setup(env: Env) -> None:
        env.text("lex.txt", lexicon)
        env.text("lm.arpa", arpa)
        if phones is not None:
            env.text("phones.txt", phones)
    return setup


CASES += [
    # --- the CTC-topologies paper's graphs (speechlab ctc)
    Case("ctc-unknown-topology", lambda e: ["ctc", "topology", "S9-T9"], "S9-T9"),
    Case("ctc-lexicon-line-without-phones", lambda e: _ctc_graph(e),
         "{d}/lex.txt:2: word 'dog' has no phones", _ctc_files(lexicon="cat k ae t\ndog\n")),
    Case("ctc-arpa-broken-line", lambda e: _ctc_graph(e), "{d}/lm.arpa:8",
         _ctc_files(arpa=_ARPA.replace("-0.4\tcat\t-0.2", "-0.4"))),
    Case("ctc-arpa-bad-count", lambda e: _ctc_graph(e), "{d}/lm.arpa",
         _ctc_files(arpa=_ARPA.replace("ngram 2=2", "ngram 2=5"))),
    Case("ctc-arpa-not-a-number", lambda e: _ctc_graph(e), "{d}/lm.arpa:9",
         _ctc_files(arpa=_ARPA.replace("-0.6\tdog", "x0.6\tdog"))),
    Case("ctc-lm-word-without-pronunciation", lambda e: _ctc_graph(e, "--missing", "error"),
         "1 LM word(s) have no pronunciation", _ctc_files(lexicon="cat k ae t\n")),
    Case("ctc-phone-missing-from-phone-list", lambda e: _ctc_graph(e, "--phones",
                                                                   str(e / "phones.txt")),
         "lexicon word 'dog' uses phone 'ao'", _ctc_files(phones="k\nae\nt\nd\ng\n")),
    Case("ctc-graph-exists", lambda e: _ctc_graph(e), "--out {d}/graph already exists",
         lambda e: (_ctc_files()(e), e.text("graph/graph.json", "{}"))),
    Case("ctc-lm-text-not-utf8", lambda e: ["ctc", "lm", str(e / "t.txt"), "--out",
                                            str(e / "lm2.arpa")],
         "{d}/t.txt:2: line is not UTF-8",
         lambda e: (e / "t.txt").write_bytes(b"a cat\n\xff\xfe\n")),
    Case("ctc-lm-order-zero", lambda e: ["ctc", "lm", str(e / "t.txt"), "--out",
                                         str(e / "lm2.arpa"), "--order", "0"],
         "--order: must be >= 1", lambda e: e.text("t.txt", "a cat\n")),
    Case("ctc-arpa-without-bos", lambda e: _ctc_graph(e), "{d}/lm.arpa: no <s> unigram",
         _ctc_files(arpa=_ARPA.replace("ngram 1=4", "ngram 1=3").replace("-1.0\t<s>\t-0.3\n", "")
                    .replace("ngram 2=2", "ngram 2=1").replace("-0.2\t<s> cat\n", "")),
         subprocess=True),
    Case("ctc-arpa-without-eos", lambda e: _ctc_graph(e), "{d}/lm.arpa: no </s> unigram",
         _ctc_files(arpa=_ARPA.replace("ngram 1=4", "ngram 1=3").replace("-0.5\t</s>\n", "")
                    .replace("ngram 2=2", "ngram 2=1").replace("-0.3\tcat </s>\n", ""))),
    Case("ctc-arpa-bos-inside-ngram", lambda e: _ctc_graph(e),
         "{d}/lm.arpa:13: <s> inside 2-gram 'cat <s>'",
         _ctc_files(arpa=_ARPA.replace("cat </s>", "cat <s>"))),
    Case("ctc-arpa-nul-byte", lambda e: _ctc_graph(e), "{d}/lm.arpa:8: line holds a NUL byte",
         _ctc_files(arpa=_ARPA.replace("\tcat\t", "\tc\0at\t"))),
    Case("ctc-lm-text-nul-byte", lambda e: ["ctc", "lm", str(e / "t.txt"), "--out",
                                            str(e / "lm2.arpa")],
         "{d}/t.txt:2: line holds a NUL byte",
         lambda e: (e / "t.txt").write_bytes(b"a cat\nthe c\x00at\n")),
    Case("ctc-lm-text-is-a-directory", lambda e: ["ctc", "lm", str(e / "d"), "--out",
                                                  str(e / "lm2.arpa")],
         "{d}/d is a directory", lambda e: (e / "d").mkdir()),
    Case("ctc-lm-text-empty", lambda e: ["ctc", "lm", str(e / "t.txt"), "--out",
                                         str(e / "lm2.arpa")],
         "{d}/t.txt: no sentences", lambda e: e.text("t.txt", "")),
    Case("ctc-lexiconp-bad-probability", lambda e: _ctc_graph(e, lexicon="lexiconp.txt"),
         "{d}/lexiconp.txt:2: expected 'word probability phone1",
         lambda e: (_ctc_files()(e), e.text("lexiconp.txt", "cat 1.0 k ae t\ndog d ao g\n"))),
    Case("ctc-lexiconp-silprob", lambda e: _ctc_graph(e, lexicon="lexiconp.txt"),
         "{d}/lexiconp.txt:1: more numbers after the probability",
         lambda e: (_ctc_files()(e), e.text("lexiconp.txt", "cat 1.0 0.2 0.8 1.1 k ae t\n"))),
    Case("ctc-lexicon-too-many-phones", lambda e: _ctc_graph(e),
         "{d}/lex.txt: 1502 phones, at most 1000",
         _ctc_files(lexicon="cat " + " ".join(f"p{i}" for i in range(1500)) + "\ndog d o\n")),
    Case("ctc-lexicon-empty", lambda e: _ctc_graph(e), "lex.txt",
         _ctc_files(lexicon="")),
    Case("tts-labels-longer-than-wav", _import_tts, "labels end at 3.000 s but",
         setup=_tts_pair(1.0, 3.0)),
    Case("tts-labels-wav-gap-said", _import_tts, "(2.000 s apart, at most 0.1 s allowed)",
         setup=_tts_pair(1.0, 3.0)),
    Case("tts-unknown-phone", _import_tts, "u1.lab:1: unknown phone 'qq'",
         setup=_tts_pair(1.0, 1.0, phone="qq")),
    Case("tts-wav-other-sample-rate", _import_tts, "sample rate 22050 Hz, expected 16000 Hz",
         setup=_tts_pair(1.0, 1.0, rate=22050)),
    Case("tts-question-file-does-not-parse",
         lambda e: ["reproduce", "salad", "--scale", "ci", "--out", str(e / "run"), "--set",
                    f"questions={e / 'q.hed'}"], "q.hed:2: not a question",
         setup=lambda e: e.text("q.hed", 'QS "C-aa" {*-aa+*}\nQS "broken {*-b+*}\n')),
    Case("tts-synth-not-a-model-dir",
         lambda e: ["synth", str(e / "m"), str(e / "lab" / "u1.lab"), "--out", str(e / "x.wav")],
         "m: not a model speechlab can load; looked for",
         setup=lambda e: (_tts_pair(1.0, 1.0)(e), (e / "m").mkdir())),
]


def _w2v_weights(change: Callable, name: str = "w2v.pt") -> Callable[[Env], None]:
    """A fairseq checkpoint whose every tensor is ``change(tensor)``, and a cuts manifest."""
    def setup(env: Env) -> None:
        import torch

        from speechlab.ssl.wav2vec2 import build
        from speechlab.testing.wav2vec2 import fairseq_state

        torch.manual_seed(0)
        state = fairseq_state(build("ci"))
        torch.save({"model": {k: change(v) for k, v in state.items()}}, env / name)
        CutSetFile(env)
    return setup


def _cuts_of(make: Callable[[Path], object]) -> Callable[[Env], None]:
    """A checkpoint and a cuts manifest of the one cut ``make(dir)`` returns."""
    def setup(env: Env) -> None:
        from lhotse import CutSet

        _w2v_checkpoint()(env)
        CutSet.from_cuts([make(env.root)]).to_file(env / "cuts.jsonl.gz")
    return setup


def _unreadable_cut(root: Path):
    cut = tone_cut(root / "bad.wav", duration=0.5, cut_id="bad")
    (root / "bad.wav").write_bytes(b"RIFF garbage")
    return cut


_SALAD_RUN: list[Path] = []


def _salad_model(change: Callable[[Path], object] = lambda m: None) -> Callable[[Env], None]:
    """A trained SALAD model directory ``m`` (the ci run's big_salad, trained once per test run
    and copied) with ``change(m)`` applied, and a label file ``lab/u1.lab``."""
    def setup(env: Env) -> None:
        if shutil.which("festival") is None:
            pytest.skip("needs festival for the corpus a model is trained on")
        if not _SALAD_RUN:
            out = Path(tempfile.mkdtemp(prefix="speechlab-salad-")) / "run"
            assert main(["reproduce", "salad", "--scale", "ci", "--out", str(out)]) == 0
            _SALAD_RUN.append(out)
        shutil.copytree(_SALAD_RUN[0] / "models" / "big_salad", env / "m")
        _tts_pair(1.0, 1.0)(env)
        change(env / "m")
    return setup


def _nan_weights(model_dir: Path) -> None:
    from speechlab.train.card import best_or_latest
    from speechlab.train.checkpoint import load_checkpoint, save_checkpoint

    path = best_or_latest(model_dir)
    ckpt = load_checkpoint(path)
    ckpt.pop("format_version")
    ckpt["model"] = {k: v.fill_(float("nan")) if v.is_floating_point() else v
                     for k, v in ckpt["model"].items()}
    save_checkpoint(path, **ckpt)


def _synth(env: Env, lab: str = "lab/u1.lab", *extra: str) -> list[str]:
    return ["synth", str(env / "m"), str(env / lab), "--out", str(env / "x.wav"), *extra]


def _en_corpus(*splits: str) -> Callable[[Env], None]:
    """A corpus of one English utterance in each of ``splits``."""
    def setup(env: Env) -> None:
        src = env.kaldi("kaldi")
        for split in splits:
            assert main(["data", "import-kaldi", str(src), "--out", str(env / "c"), "--split",
                         split]) == 0
    return setup


def _unvoiced_tts_corpus(env: Env) -> None:
    """A TTS corpus whose every wav is silence: WORLD finds no F0 in it."""
    import soundfile as sf

    for split in ("train", "dev", "test"):
        (env / f"src-{split}" / "wav").mkdir(parents=True)
        for k in range(2):
            sf.write(env / f"src-{split}" / "wav" / f"{split}{k}.wav", np.zeros(16000), 16000)
            env.text(f"src-{split}/lab/{split}{k}.lab", _LAB.format(s=0, e=10**7) + "\n")
        assert main(["data", "import-tts", str(env / f"src-{split}" / "wav"),
                     str(env / f"src-{split}" / "lab"), "--out", str(env / "c"), "--split",
                     split]) == 0


def _synthetic_splits(env: Env, name: str = "c") -> None:
    """A corpus.json listing train/dev/test of an earlier build (nothing else is needed to
    be refused)."""
    split = {"utterances": 1, "hours": 0.0, "origin": "synthetic", "languages": {}}
    env.text(f"{name}/corpus.json", json.dumps({"sample_rate": 16000, "kind": "tts", "splits": {
        s: split for s in ("train", "dev", "test")}}))


def _tts_imported(env: Env) -> None:
    _tts_pair(1.0, 1.0)(env)
    assert main(_import_tts(env)) == 0


CASES += [
    # --- paths: a split name is a file name, never a path (import-tts as import-kaldi)
    Case("tts-import-split-escapes", lambda e: [*_import_tts(e), "--split", "../escape"],
         "split name '../escape' must be letters", setup=_tts_pair(1.0, 1.0)),
    Case("tts-import-split-absolute", lambda e: [*_import_tts(e), "--split", "/tmp/x"],
         "split name '/tmp/x'", setup=_tts_pair(1.0, 1.0)),
    Case("tts-import-tolerance-nan", lambda e: [*_import_tts(e), "--tolerance", "nan"],
         "--tolerance: must be a number, got nan", setup=_tts_pair(1.0, 1.0)),
    Case("tts-import-tolerance-negative", lambda e: [*_import_tts(e), "--tolerance", "-1"],
         "--tolerance: must be >= 0", setup=_tts_pair(1.0, 1.0)),
    # --- nothing existing is replaced without --overwrite: corpora...
    Case("tts-import-over-existing-split", _import_tts,
         "already holds split 'train' (1 utterances", setup=_tts_imported),
    Case("tts-corpus-over-tts-corpus", lambda e: ["data", "make-tts-corpus", "--out",
                                                  str(e / "c"), "--minutes", "0.1"],
         "holds split(s) ['dev', 'test', 'train'] of an earlier build", setup=_synthetic_splits),
    Case("tts-corpus-over-imported-tts-split", lambda e: ["data", "make-tts-corpus", "--out",
                                                          str(e / "c"), "--minutes", "0.1"],
         "holds imported split(s) ['train']", setup=_tts_imported),
    Case("tts-corpus-over-asr-corpus", lambda e: ["data", "make-tts-corpus", "--out",
                                                  str(e / "corpus"), "--minutes", "0.1"],
         "holds imported split(s) ['train']", setup=lambda e: e.corpus()),
    Case("asr-corpus-over-earlier-build", lambda e: ["data", "make-asr-corpus", "--tiny",
                                                     "--out", str(e / "c")],
         "holds split(s) ['dev', 'test', 'train'] of an earlier build",
         setup=_synthetic_splits),
    # --- wav2vec 2.0 diagnosis: bad audio, weights and side files are named, not a traceback
    Case("w2v-diagnose-unreadable-audio", lambda e: _diagnose(e),
         "cuts.jsonl.gz: cut 'bad': {d}/bad.wav (utterance 'bad'): unreadable audio",
         _cuts_of(_unreadable_cut)),
    Case("w2v-diagnose-nan-audio", lambda e: _diagnose(e),
         "cuts.jsonl.gz: cut 'nan': {d}/nan.wav (utterance 'nan'): 100 non-finite sample",
         _cuts_of(lambda root: __import__("speechlab.testing.audio", fromlist=["x"])
                  .nonfinite_cut(root / "nan.wav", cut_id="nan"))),
    Case("w2v-nan-weights", lambda e: _diagnose(e),
         "{d}/w2v.pt: weight 'feature_encoder.layers.0.norm.weight' holds 8 non-finite",
         _w2v_weights(lambda t: t.fill_(float("nan")))),
    Case("w2v-int64-weights", lambda e: _diagnose(e), "is of type torch.int64, not floating",
         _w2v_weights(lambda t: t.long())),
    Case("w2v-empty-checkpoint", lambda e: _diagnose(e, "empty.pt"),
         "{d}/empty.pt is not a wav2vec 2.0 checkpoint (the file is empty)",
         lambda e: ((e / "empty.pt").write_bytes(b""), CutSetFile(e))),
    Case("w2v-hf-config-is-a-list", lambda e: _diagnose(e, "hf"),
         "{d}/hf/config.json: not a Wav2Vec2 config (TypeError: it holds a JSON list",
         lambda e: (e.text("hf/config.json", "[1, 2]"), CutSetFile(e))),
    Case("w2v-hf-config-not-utf8", lambda e: _diagnose(e, "hf"),
         "{d}/hf/config.json: not a Wav2Vec2 config",
         lambda e: (e.text("hf/config.json", ""), (e / "hf" / "config.json").write_bytes(
             b"\xff{}"), CutSetFile(e))),
    # --- synthesis: labels without time, broken models and side files
    Case("synth-labels-span-no-time", lambda e: _synth(e, "zero.lab"),
         "{d}/zero.lab: the labels span no time",
         _salad_model(lambda m: (m.parent / "zero.lab").write_text(
             _LAB.format(s=0, e=0) + "\n" + _LAB.format(s=0, e=0) + "\n"))),
    Case("synth-label-time-huge", lambda e: _synth(e, "long.lab"),
         "{d}/long.lab:1: end time 1000000000000000 is 100000000 s",
         _salad_model(lambda m: (m.parent / "long.lab").write_text(
             _LAB.format(s=0, e=10**15) + "\n"))),
    Case("synth-nan-weights", lambda e: _synth(e), "holds 16 non-finite value(s)",
         _salad_model(_nan_weights)),
    Case("synth-sidecar-incomplete", lambda e: _synth(e),
         "{d}/m/tts.json: incomplete or corrupt normalizer file",
         _salad_model(lambda m: (m / "tts.json").write_text('{"inputs": 1}'))),
    Case("synth-labels-not-utf8", lambda e: _synth(e, "bad.lab"),
         "{d}/bad.lab: a label file must be UTF-8 text",
         _salad_model(lambda m: (m.parent / "bad.lab").write_bytes(b"\xff\xfe0 1 x"))),
    # text given where the labels file goes: the error says how to give text
    Case("synth-text-as-labels", lambda e: ["synth", str(e / "m"), "Good morning to you.",
                                            "--out", str(e / "x.wav")],
         "synth: no labels file 'Good morning to you.'; to speak text, give it with --text: "
         "speechlab synth {d}/m --text 'Good morning to you.' --out {d}/x.wav"),
    Case("synth-labels-missing", lambda e: _synth(e, "none.lab"),
         "synth: no labels file '{d}/none.lab'"),
    Case("transcribe-wav-missing", lambda e: ["transcribe", str(e / "ctc"), str(e / "none.wav")],
         "{d}/none.wav: audio file does not exist; check the path",
         setup=lambda e: _tiny_ctc_package(e / "ctc")),
    # bytes that are not UTF-8 on the command line reach Python as lone surrogates
    Case("synth-text-not-utf8", lambda e: ["synth", str(e / "m"), "--text", "caf\udce9 ole",
                                           "--out", str(e / "x.wav")],
         "the text is not valid Unicode at character 4 ('\\udce9'); give UTF-8 text",
         _salad_model(lambda m: None)),
    # --- recipes and corpora are checked whole before any work (no model trained, no
    # feature computed for a run that must fail)
    Case("topologies-no-acoustic-weights", lambda e: ["reproduce", "topologies", "--scale", "ci",
                                                      "--out", str(e / "run"), "--set",
                                                      "acoustic_weights=[]"],
         "acoustic_weights: give at least one weight"),
    Case("topologies-unknown-language", lambda e: ["reproduce", "topologies", "--scale", "ci",
                                                   "--out", str(e / "run"), "--set",
                                                   "languages=[xx]"],
         "languages: unknown language(s) ['xx']"),
    Case("multisoftmax-no-languages", lambda e: ["reproduce", "multisoftmax", "--scale", "ci",
                                                 "--out", str(e / "run"), "--set", "languages=[]"],
         "languages: give at least one language"),
    Case("local-attention-mask-longer-than-crop",
         lambda e: ["reproduce", "local-attention", "--scale", "ci", "--out", str(e / "run"),
                    "--set", "pretrain_task.mask_length=100000"],
         "pretrain_task.mask_length 100000 frames is not shorter than a crop"),
    Case("local-attention-no-beams", lambda e: ["reproduce", "local-attention", "--scale", "ci",
                                                "--out", str(e / "run"), "--set", "beams=[]"],
         "beams: give at least one value"),
    Case("reproduce-corpus-without-dev", lambda e: ["reproduce", "topologies", "--scale", "ci",
                                                    "--corpus", str(e / "c"), "--out",
                                                    str(e / "run")],
         "{d}/c/dev_cuts.jsonl.gz is missing: a corpus dir needs train/dev/test",
         _en_corpus("train", "test")),
    Case("reproduce-corpus-without-the-languages",
         lambda e: ["reproduce", "multisoftmax", "--scale", "ci", "--corpus", str(e / "c"),
                    "--out", str(e / "run")],
         "the corpus holds no ['hi', 'ta', 'gu'] utterances (it holds ['en'])",
         _en_corpus("train", "dev", "test")),
    Case("salad-corpus-without-voiced-frames",
         lambda e: ["reproduce", "salad", "--scale", "ci", "--corpus", str(e / "c"), "--out",
                    str(e / "run")],
         "no voiced frames in the training data (2 utterances", _unvoiced_tts_corpus),
    # --- configs and Kaldi tables: a key or id given twice, bytes that are not text
    Case("config-duplicate-key", lambda e: ["reproduce", "multisoftmax", "--scale", "ci",
                                            "--config", str(e / "r.yaml"), "--out",
                                            str(e / "run")],
         "config file {d}/r.yaml:3: key 'max_steps' is given twice (also at line 2)",
         lambda e: e.text("r.yaml", "train:\n  max_steps: 3\n  max_steps: 5\n")),
    Case("config-duplicate-key-in-override", lambda e: ["reproduce", "local-attention", "--scale",
                                                        "ci", "--out", str(e / "run"), "--set",
                                                        "variants={Orig: '', Orig: '2-3'}"],
         "'variants': \"{{Orig: '', Orig: '2-3'}}\" is not a YAML list or mapping (duplicate "
         "key 'Orig'"),
    Case("config-override-unclosed-list", lambda e: ["reproduce", "multisoftmax", "--scale", "ci",
                                                     "--out", str(e / "run"), "--set",
                                                     "languages=[hi"],
         "'languages': '[hi' is not a YAML list or mapping"),
    Case("kaldi-text-nul-byte", lambda e: ["data", "import-kaldi", str(e / "kaldi"), "--out",
                                           str(e / "c")], "kaldi/text:1: line holds a NUL byte",
         lambda e: (e.kaldi(), (e / "kaldi" / "text").write_bytes(b"u1 hel\x00lo\n"))),
    # --- sizes are bounded where they enter, saying why, before any work
    Case("ctc-topology-phones-huge", lambda e: ["ctc", "topology", "S3-T2", "--phones",
                                                "1000000000"],
         "--phones: must be <= 1000 (phone sets hold tens to hundreds; the token FST has about "
         "N^2 arcs), got 1000000000", subprocess=True),
    Case("ctc-topology-phones-zero", lambda e: ["ctc", "topology", "S1-T1", "--phones", "0"],
         "--phones: must be >= 1, got 0"),
    Case("ctc-lm-order-huge", lambda e: ["ctc", "lm", str(e / "t.txt"), "--out",
                                         str(e / "lm2.arpa"), "--order", "1000"],
         "--order: must be <= 10", lambda e: e.text("t.txt", "a cat\n")),
    Case("ctc-lm-vocab-zero", lambda e: ["ctc", "lm", str(e / "t.txt"), "--out",
                                         str(e / "lm2.arpa"), "--vocab", "0"],
         "--vocab: must be >= 1", lambda e: e.text("t.txt", "a cat\n")),
    Case("tts-corpus-minutes-huge", lambda e: ["data", "make-tts-corpus", "--out", str(e / "c"),
                                               "--minutes", "1e9"],
         "'minutes' must be <= 1440 (a day of speech"),
    Case("tts-corpus-workers-huge", lambda e: ["data", "make-tts-corpus", "--out", str(e / "c"),
                                               "--workers", "100000"], "'workers' must be <= 64"),
    Case("asr-corpus-minutes-huge", lambda e: ["data", "make-asr-corpus", "--out", str(e / "c"),
                                               "--minutes", "en=1e9"],
         "'minutes' must be <= 1440"),
    Case("import-sample-rate-huge", lambda e: ["data", "import-kaldi", str(e / "kaldi"), "--out",
                                               str(e / "c"), "--sample_rate", "1e12"],
         "'sample_rate' must be <= 384000", lambda e: e.kaldi()),
    Case("score-resamples-huge", lambda e: _score(e, "--num_resamples", "1000000000"),
         "'num_resamples' must be <= 1e+06"),
    Case("fbank-mel-bins-huge", lambda e: ["features", "compute", "--cuts", str(e / "c.jsonl.gz"),
                                           "--out", str(e / "f"), "--num_mel_bins", "100000"],
         "'num_mel_bins' must be <= 1024", _nan_cuts),
    Case("decode-beam-huge", lambda e: _decode(e, "--beam", "100000000"), "--beam must be <= 1000",
         _decode_setup),
    Case("reproduce-jobs-huge", lambda e: ["reproduce", "multisoftmax", "--scale", "ci",
                                           "--jobs", "100000", "--out", str(e / "run")],
         "--jobs: must be <= 256"),
    Case("synth-window-negative", lambda e: ["synth", str(e / "m"), str(e / "lab" / "u1.lab"),
                                             "--out", str(e / "x.wav"), "--window", "-1"],
         "--window: must be >= 0, got -1", setup=lambda e: (_tts_pair(1.0, 1.0)(e),
                                                            (e / "m").mkdir())),
    Case("diagnose-utterances-huge", lambda e: _diagnose(e, "w2v.pt", "--utterances", "10000"),
         "--utterances: must be <= 100 (one row of the figure each)", _w2v_checkpoint()),
    Case("diagnose-utterances-zero", lambda e: _diagnose(e, "w2v.pt", "--utterances", "0"),
         "--utterances: must be >= 1", _w2v_checkpoint()),
    Case("w2v-config-radius-huge", lambda e: ["wav2vec2", "config", "--radius", "99999999999",
                                              "--out", str(e / "m.yaml")],
         "--radius must be <= 10000"),
    Case("salad-epochs-huge", lambda e: ["reproduce", "salad", "--scale", "ci", "--out",
                                         str(e / "run"), "--set", "epochs=1e12"],
         "'epochs' must be <= 10000 (the paper trains 300 epochs)"),
    Case("train-max-steps-huge", lambda e: ["reproduce", "multisoftmax", "--scale", "ci", "--out",
                                            str(e / "run"), "--set", "train.max_steps=1e12"],
         "'train.max_steps' must be <= 1e+07"),
    Case("topologies-lm-order-huge", lambda e: ["reproduce", "topologies", "--scale", "ci",
                                                "--out", str(e / "run"), "--set", "lm_order=100"],
         "'lm_order' must be <= 10"),
    # ...and files or directories every writing command makes
    Case("ctc-lm-out-exists", lambda e: ["ctc", "lm", str(e / "t.txt"), "--out",
                                         str(e / "lm.arpa")],
         "--out {d}/lm.arpa already exists (file); pass --overwrite",
         setup=lambda e: (e.text("t.txt", "a cat\n"), e.text("lm.arpa", "old\n"))),
    Case("w2v-config-out-exists", lambda e: ["wav2vec2", "config", "--out", str(e / "m.yaml")],
         "--out {d}/m.yaml already exists", setup=lambda e: e.text("m.yaml", "old: 1\n")),
    Case("synth-out-exists", lambda e: ["synth", str(e / "m"), str(e / "lab" / "u1.lab"),
                                        "--out", str(e / "x.wav")],
         "--out {d}/x.wav already exists",
         setup=lambda e: (_tts_pair(1.0, 1.0)(e), (e / "m").mkdir(), e.tone("x.wav"))),
    Case("diagnose-out-exists", lambda e: _diagnose(e),
         "--out {d}/diag already exists (directory, not empty)",
         setup=lambda e: (_w2v_checkpoint()(e), e.text("diag/results.json", "{}"))),
    Case("over-training-out-exists", lambda e: _over_training(e),
         "--out {d}/over already exists (directory, not empty)",
         setup=lambda e: (CutSetFile(e), (e / "run").mkdir(),
                          e.text("over/attention_over_training.json", "{}"))),
    Case("over-training-no-checkpoint", lambda e: _over_training(e),
         "{d}/run holds no checkpoint", setup=lambda e: (CutSetFile(e), (e / "run").mkdir())),
    Case("over-training-no-cuts", lambda e: _over_training(e, "--cuts", str(e / "none.jsonl.gz")),
         "{d}/none.jsonl.gz: no such cuts manifest",
         setup=lambda e: ((e / "run").mkdir(), _w2v_checkpoint("run/ckpt-00000010.pt")(e))),
    Case("over-training-bad-checkpoint", lambda e: _over_training(e),
         "{d}/run/ckpt-00000010.pt is not a wav2vec 2.0 checkpoint",
         setup=lambda e: (CutSetFile(e), e.text("run/ckpt-00000010.pt", "not a checkpoint"))),
    Case("over-training-utterances-zero", lambda e: _over_training(e, "--utterances", "0"),
         "--utterances: must be >= 1", setup=lambda e: (CutSetFile(e), (e / "run").mkdir())),
    Case("score-json-exists", lambda e: _score(e, "--json", str(e / "s.json")),
         "--json {d}/s.json already exists", setup=lambda e: e.text("s.json", "{}")),
    Case("cmvn-out-exists", lambda e: ["features", "cmvn", "--cuts", str(e / "c.jsonl.gz"),
                                       "--out", str(e / "cmvn.safetensors")],
         "--out {d}/cmvn.safetensors already exists",
         setup=lambda e: (_nan_cuts(e), e.text("cmvn.safetensors", "old"))),
    Case("cuts-out-exists", lambda e: ["features", "compute", "--cuts", str(e / "c.jsonl.gz"),
                                       "--out", str(e / "f"), "--cuts-out",
                                       str(e / "c.jsonl.gz")],
         "--cuts-out {d}/c.jsonl.gz already exists", _nan_cuts),
    Case("tokenizers-out-exists", lambda e: ["text", "build-tokenizers", "--cuts",
                                             str(e / "c.jsonl.gz"), "--out", str(e / "tok")],
         "--out {d}/tok already exists",
         setup=lambda e: (_nan_cuts(e), e.text("tok/en.json", "{}"))),
    Case("report-out-exists", lambda e: ["report", str(e / "runA"), "--out", str(e / "rep")],
         "--out {d}/rep already exists",
         setup=lambda e: (_results(e), e.text("rep/report.html", "old"))),
]


# speechlab serve: what is refused before the server starts.
CASES += [
    Case("serve-no-demo-run", lambda e: ["serve", "--demo", str(e / "nodemo"), "--port", "0"],
         "no model to serve: no PATH was given and {d}/nodemo holds no model of `make demo`"),
    Case("serve-missing-model", lambda e: ["serve", str(e / "missing"), "--port", "0"],
         "{d}/missing does not exist"),
    Case("serve-not-a-model", lambda e: ["serve", str(e / "empty"), "--port", "0"],
         "{d}/empty: not a model speechlab can load", setup=lambda e: (e / "empty").mkdir()),
    Case("serve-port-out-of-range", lambda e: ["serve", "--port", "70000"], "must be <= 65535"),
    Case("serve-max-streams-zero", lambda e: ["serve", "--max-streams", "0"], "must be >= 1"),
    Case("serve-upload-limit-nan", lambda e: ["serve", "--max-upload-mb", "nan"],
         "must be a number"),
]

def _export(env: Env, model: str, *extra: str) -> list[str]:
    return ["export", str(env / model), "--out", str(env / "pkg"), "--format", "onnx", *extra]


def _onnx_package(env: Env) -> None:
    env.run_dir()
    assert main(_export(env, "run/models/multisoftmax_lid")) == 0


# speechlab export --format onnx: what has no graphs, and what is there already.
CASES += [
    Case("export-onnx-w2v", lambda e: _export(e, "w2v"),
         "{d}/w2v: a wav2vec 2.0 encoder does not export to ONNX; --format onnx takes the "
         "streaming RNN-T", setup=lambda e: _tiny_w2v_package(e / "w2v")),
    Case("export-int8-without-onnx", lambda e: ["export", str(e / "ctc"), "--out",
                                                str(e / "pkg"), "--int8"],
         "--int8 quantizes ONNX graphs: give it with --format onnx",
         setup=lambda e: _tiny_ctc_package(e / "ctc")),
    Case("export-onnx-over-existing", lambda e: _export(e, "run/models/multisoftmax_lid"),
         "--out {d}/pkg already exists", setup=_onnx_package),
    Case("export-an-onnx-package", lambda e: ["export", str(e / "pkg"), "--out",
                                              str(e / "again")],
         "{d}/pkg is an ONNX package; export from the model it was made from",
         setup=_onnx_package),
    Case("onnx-graph-corrupt", lambda e: ["transcribe", str(e / "pkg"), str(e / "tone.wav")],
         "{d}/pkg/predictor.onnx: not an ONNX graph onnxruntime can run",
         setup=lambda e: (_onnx_package(e), e.tone(),
                          (e / "pkg" / "predictor.onnx").write_bytes(b"not a graph")),
         subprocess=True),
]


def _tiny_ctc_package(out: Path) -> None:
    from speechlab.testing.tiny_models import ctc_package

    ctc_package(out)


def _tiny_w2v_package(out: Path) -> None:
    from speechlab.testing.tiny_models import wav2vec2_package

    wav2vec2_package(out, preset="tiny")


def test_every_command_that_replaces_an_output_has_overwrite():
    """The one rule: each declared "file"/"dir" output is guarded by the CLI and may be
    replaced with --overwrite; other kinds are corpora, runs or caches (utils.OUTPUT_KINDS)."""
    import argparse

    from speechlab.cli import build_parser
    from speechlab.files import OUTPUT_KINDS, REPLACED_ONLY_WITH_OVERWRITE

    def commands(parser):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield sub
                    yield from commands(sub)

    writers = 0
    for cmd in commands(build_parser()):
        outputs = cmd._defaults.get("outputs") or {}
        assert set(outputs.values()) <= set(OUTPUT_KINDS), (cmd.prog, outputs)
        dests = {a.dest for a in cmd._actions}
        assert set(outputs) <= dests, (cmd.prog, outputs)
        if set(outputs.values()) & set(REPLACED_ONLY_WITH_OVERWRITE):
            writers += 1
            assert "overwrite" in dests, f"{cmd.prog} replaces an output but has no --overwrite"
    assert writers >= 9


def _one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert lines[0].startswith("speechlab: error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path / "case")
    e.root.mkdir()
    yield e
    e.unlock()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_exits_2_with_one_line_and_leaves_nothing_behind(case, env, capsys):
    case.setup(env)
    argv = case.argv(env)
    before = snapshot(env.root)
    capsys.readouterr()
    # What a user sees on stderr: the error line and any log line the command printed first.
    handler = logging.StreamHandler(sys.stderr)
    root = logging.getLogger()
    root.addHandler(handler)
    old_level, root.level = root.level, logging.INFO
    try:
        rc = main(argv)
    finally:
        root.removeHandler(handler)
        root.level = old_level
    out = capsys.readouterr()
    assert rc == 2, (rc, out)
    line = _one_line(out.err)
    assert case.names.format(d=env.root) in line, line
    assert snapshot(env.root) == before, "the command left something behind or changed an input"
    if case.subprocess:
        r = subprocess.run([sys.executable, "-m", "speechlab.cli", *argv], capture_output=True,
                           text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert r.returncode == 2, r
        assert _one_line(r.stderr) == line
        assert snapshot(env.root) == before


# ---------------------------------------------------------------------------------------------
# Inputs that look odd but are fine.


def test_nfc_and_nfd_transcripts_score_as_the_same_text(env, capsys):
    text = "caf\u00e9 \u0928\u0958\u094d\u0936\u093e \u0b95\u0bca\u0b9f\u0bc1"
    env.text("ref.txt", f"u1 {text}\n")
    env.text("hyp.txt", f"u1 {unicodedata.normalize('NFD', text)}\n")
    assert main(["score", "--ref", str(env / "ref.txt"), "--hyp", str(env / "hyp.txt"),
                 "--json", str(env / "s.json")]) == 0
    assert json.loads((env / "s.json").read_text())["errors"] == 0
    assert "%WER 0.00" in capsys.readouterr().out


def test_fault_messages_cover_the_errnos_users_meet():
    import errno

    from speechlab.cli import fault_message

    for code in (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS,
                 errno.EISDIR, errno.ENOTDIR, errno.ENOENT, errno.EEXIST, errno.EIO):
        msg = fault_message(OSError(code, os.strerror(code), "/data/x.pt"))
        assert "/data/x.pt" in msg and "; " in msg, msg
    assert "free space and rerun" in fault_message(OSError(errno.ENOSPC, "x", "/d/ckpt.pt"))
    assert "resumes" in fault_message(RuntimeError("[enforce fail at inline_container.cc:672] ."))
    assert fault_message(ValueError("a bug")) is None  # bugs keep their traceback


@pytest.mark.parametrize("command, module", [
    (["data", "make-asr-corpus", "--tiny", "--no-progress"], "speechlab.data.corpus"),
    (["data", "make-tts-corpus", "--minutes", "0.1"], "speechlab.tts.corpus"),
])
def test_a_corpus_build_that_fills_the_disk_removes_what_it_wrote(command, module, env, capsys,
                                                                   monkeypatch):
    import errno
    import importlib

    mod = importlib.import_module(module)
    real, calls = mod._write_wav, []

    def full_after_two(path, audio):
        calls.append(path)
        if len(calls) > 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, audio)

    monkeypatch.setattr(mod, "_write_wav", full_after_two)
    before = snapshot(env.root)
    assert main([*command, "--out", str(env / "c")]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "no space left on device" in line and "free space and rerun" in line, line
    assert len(calls) == 3
    assert snapshot(env.root) == before, "the failed build left files behind"


def test_a_reader_that_stops_early_is_not_an_error():
    """`speechlab ctc topology ... | head -1`: the closed pipe ends the command quietly."""
    proc = subprocess.Popen([sys.executable, "-m", "speechlab.cli", "ctc", "topology", "S3-T2",
                             "--phones", "300"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.stdout.readline().startswith(b"S3-T2")
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and not err, err


def test_a_diagnosis_stopped_by_a_full_disk_leaves_no_half_written_directory(env, capsys,
                                                                              monkeypatch):
    import errno

    from speechlab.ssl.wav2vec2 import diagnose

    _w2v_checkpoint()(env)

    def full(diagnosis, path, names):
        path.write_bytes(b"half a png")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(diagnose, "grid_figure", full)
    before = snapshot(env.root)
    assert main(_diagnose(env)) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"no space left on device while writing {env / 'diag'};" in line, line
    assert snapshot(env.root) == before
