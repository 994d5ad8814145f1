"""Optional sentencepiece BPE tokenizer with the grapheme tokenizer's interface (blank at id 0).

For models that want sub-word units instead of the paper's graphemes. The sentencepiece model is
trained with ``<blank>`` as its id-0 control symbol (sentencepiece's "pad" slot) and ``<unk>`` at
1, so the ids it produces are directly transducer/CTC output ids: no shifting between the two
numberings. Normalisation is ours (:func:`normalize_text`), sentencepiece's own NFKC rule is
turned off so the two cannot disagree.

A model directory holds ``bpe.model`` (sentencepiece protobuf) and ``tokenizer.json``
(language and settings).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from pathlib import Path

from speechlab.errors import DataError
from speechlab.files import atomic_path, atomic_write_json
from speechlab.text.graphemes import BLANK
from speechlab.text.normalize import normalize_text

MODEL_FILE = "bpe.model"
META_FILE = "tokenizer.json"


class BpeTokenizer:
    """Sentencepiece BPE: ``encode``/``decode``/``symbols``/``len``/``save``/``load``.

    Build with :meth:`train` or :meth:`load`; the constructor takes a serialized model.
    """

    blank_id = 0
    unk_id = 1

    def __init__(self, model_proto: bytes, language: str, normalize: bool = True) -> None:
        import sentencepiece as spm

        self._proto = model_proto
        self.language = language
        self.normalize = normalize
        self._sp = spm.SentencePieceProcessor(model_proto=model_proto)
        if self._sp.id_to_piece(0) != BLANK or self._sp.unk_id() != self.unk_id:
            raise DataError("sentencepiece model does not have <blank> at 0 and <unk> at 1; "
                            "train it with BpeTokenizer.train")
        self.symbols: tuple[str, ...] = tuple(
            self._sp.id_to_piece(i) for i in range(self._sp.get_piece_size())
        )

    @classmethod
    def train(
        cls,
        sentences: Iterable[str],
        model_dir: str | Path,
        language: str,
        vocab_size: int = 500,
        normalize: bool = True,
        character_coverage: float = 1.0,
    ) -> BpeTokenizer:
        """Train on ``sentences`` and save into ``model_dir``.

        ``vocab_size`` is an upper bound: a corpus too small to support that many merges yields
        a smaller vocabulary rather than an error (``hard_vocab_limit=False``).
        ``character_coverage=1.0`` keeps every character seen, which Indic scripts need (the
        default 0.9995 would map rare conjunct parts to ``<unk>``).
        """
        import sentencepiece as spm

        def texts():
            for s in sentences:
                s = normalize_text(s, language) if normalize else s
                if s:
                    yield s

        buf = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=texts(),
                model_writer=buf,
                model_type="bpe",
                vocab_size=vocab_size,
                hard_vocab_limit=False,
                character_coverage=character_coverage,
                pad_id=0,
                pad_piece=BLANK,
                unk_id=1,
                bos_id=-1,
                eos_id=-1,
                normalization_rule_name="identity",
                minloglevel=2,
            )
        except RuntimeError as e:
            raise DataError(f"sentencepiece training for {language!r} failed: {e}") from None
        tok = cls(buf.getvalue(), language, normalize)
        tok.save(model_dir)
        return tok

    def __len__(self) -> int:
        return len(self.symbols)

    def __repr__(self) -> str:
        return f"BpeTokenizer(language={self.language!r}, size={len(self)})"

    def encode(self, text: str, utt: str | None = None) -> list[int]:
        """Text -> piece ids (never 0).

        Raises:
            DataError: naming the characters the model cannot represent (they would be <unk>).
        """
        norm = normalize_text(text, self.language) if self.normalize else text
        ids = self._sp.encode(norm)
        if self.unk_id in ids:
            bad = sorted({c for c in norm if not c.isspace() and self._sp.piece_to_id(c) == self.unk_id})
            at = f" (utterance {utt!r})" if utt is not None else ""
            raise DataError(
                f"characters {bad} in {text!r}{at} are not in the {self.language!r} BPE model; "
                "retrain it on text that includes them"
            )
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """Piece ids -> text; blanks are skipped."""
        keep = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self):
                raise DataError(f"id {i} outside the {self.language!r} BPE vocabulary of {len(self)}")
            if i != self.blank_id:
                keep.append(i)
        return self._sp.decode(keep)

    def save(self, model_dir: str | Path) -> None:
        model_dir = Path(model_dir)
        with atomic_path(model_dir / MODEL_FILE) as tmp:
            tmp.write_bytes(self._proto)
        atomic_write_json(model_dir / META_FILE, {
            "type": "bpe", "language": self.language, "normalize": self.normalize,
            "vocab_size": len(self),
        })

    @classmethod
    def load(cls, model_dir: str | Path) -> BpeTokenizer:
        model_dir = Path(model_dir)
        try:
            meta = json.loads((model_dir / META_FILE).read_text(encoding="utf-8"))
            proto = (model_dir / MODEL_FILE).read_bytes()
        except FileNotFoundError as e:
            raise DataError(f"BPE model dir {model_dir} lacks {Path(e.filename).name}; "
                            "train it with BpeTokenizer.train") from None
        except json.JSONDecodeError as e:
            raise DataError(f"{model_dir / META_FILE} is not valid JSON: {e}") from None
        if meta.get("type") != "bpe":
            raise DataError(f"{model_dir / META_FILE}: not a BPE tokenizer")
        try:
            return cls(proto, str(meta["language"]), bool(meta.get("normalize", True)))
        except (RuntimeError, OSError) as e:
            raise DataError(f"{model_dir / MODEL_FILE} is not a sentencepiece model: {e}") from None
