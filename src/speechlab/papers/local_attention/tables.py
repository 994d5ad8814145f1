"""The local-attention paper's tables and figure from a run's decodings: Table 1, the
diagnosis table and Fig. 2, the training table, the hypotheses and the run's notes.

:func:`local_attention_results` is the reproduction's report. It picks each row by the typed
jobs of the plan (a fine-tune's spec, a decoding's options), never by a name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from speechlab.experiment.jobs import Job, TrainJob
from speechlab.experiment.scoring import Scored, training_table, write_hyps
from speechlab.metrics import cer, wer, werr, werr_interval
from speechlab.report import Figure, Results, Table
from speechlab.ssl.wav2vec2.config import format_blocks, preset
from speechlab.papers.local_attention.recipe import (
    Decode,
    Diagnosis,
    DiagnosisResult,
    FineTuning,
    LocalAttentionConfig,
    LocalAttentionData,
    Transcription,
    VariantDecoding,
)

COLUMNS = ["Model", "LMSAB blocks", "Beam", "Dev WER", "Dev CER", "Test WER", "Test CER",
           "Test WERR", "WERR 95% CI"]

UNSEEN_COLUMNS = ["Unseen-voice WER", "Unseen-voice CER"]
UNSEEN_CAPTION = (" Unseen-voice WER/CER: the test sentences read by voices no training "
                  "utterance has, beside the test set read by training's voices.")

TABLE1_CAPTION = (
    "WER and CER [%] per model and decoding (Table 1): Viterbi (None) and CTC beam search with "
    "the word n-gram LM at each beam (LM weight chosen on dev at the first beam, so dev rows "
    "with an LM are tuned on). Test WERR: relative test WER reduction against Orig at the same "
    "decoding [%] (positive: better than Orig), with its paired-bootstrap 95% interval over "
    "the test utterances.")


def _decoded(plan: Sequence[Job], decoded: Mapping[Decode, object], options: type
             ) -> list[tuple[Decode, object]]:
    """The plan's decodings with options of type ``options`` and their results, in plan order
    (a decoding without a result is left out)."""
    return [(j, decoded[j]) for j in plan if not isinstance(j, TrainJob)
            and isinstance(j.options, options) and j in decoded]


def _beam(beam: int | None) -> str:
    return "None" if beam is None else str(beam)


def table1(data: LocalAttentionData, variants: list[tuple[Decode, VariantDecoding]], out: Path
           ) -> Table:
    """Table 1; every test hypothesis goes to ``hyps/<model>_<decoding>.txt``."""
    refs = {"dev": data.dev, "test": data.test}
    if data.unseen:
        refs["unseen"] = data.unseen
    ids = {s: [u.id for u in refs[s]] for s in refs}
    columns = COLUMNS + (UNSEEN_COLUMNS if data.unseen else [])

    def rates(by_split, split):
        r, h = [u.text for u in refs[split]], [by_split[split].get(i, "") for i in ids[split]]
        return wer(r, h, ids=ids[split]), cer(r, h, ids=ids[split])

    # The baseline of the WERR column, at each decoding: Orig, full attention everywhere.
    orig = next(((j, d) for j, d in variants if isinstance(j.model.spec, FineTuning)
                 and j.model.spec.original), None)
    orig_test = {k: rates(v, "test")[0] for k, v in orig[1].decoding.hyps.items()} if orig else {}
    rows, systems = [], {}
    for job, d in variants:
        name = job.name
        for beam, by_split in d.decoding.hyps.items():
            decoding = _beam(beam)
            row: list = [name if beam is None else "",
                         (format_blocks(d.blocks) or "none") if beam is None else "", decoding]
            (dev_w, dev_c), (test_w, test_c) = rates(by_split, "dev"), rates(by_split, "test")
            row += [100 * dev_w.wer, 100 * dev_c.wer, 100 * test_w.wer, 100 * test_c.wer]
            base = orig_test.get(beam)
            if (orig is not None and job is orig[0]) or base is None or base.wer <= 0:
                row += [None, None]
            else:
                low, high = werr_interval(base, test_w)
                row += [werr(base.wer, test_w.wer), f"[{low:+.1f}, {high:+.1f}]"]
            if data.unseen:
                unseen_w, unseen_c = (rates(by_split, "unseen") if "unseen" in by_split
                                      else (None, None))
                row += [None if unseen_w is None else 100 * unseen_w.wer,
                        None if unseen_c is None else 100 * unseen_c.wer]
            rows.append(row)
            label = "viterbi" if beam is None else f"beam{decoding}"
            systems[f"{name}_{label}"] = Scored(dict(by_split["test"]), {"en": test_w},
                                                {"en": test_c})
    if systems:
        write_hyps(out / "hyps", data.test, systems)
    caption = TABLE1_CAPTION + (UNSEEN_CAPTION if data.unseen else "")
    return Table("table1", caption, columns, rows,
                 formats={c: "{:.1f}" for c in [*COLUMNS[3:8], *columns[len(COLUMNS):]]})


def _notes(cfg: LocalAttentionConfig, data: LocalAttentionData, scale: str,
           variants: list[tuple[Decode, VariantDecoding]], diag: DiagnosisResult | None,
           table: Table) -> str:
    lm_w = {j.name: d.decoding.lm_weight for j, d in variants}
    suggested = format_blocks(diag.suggested) if diag is not None and diag.suggested else "none"
    front = ("the paper's conv feature encoder" if cfg.front_end == "conv" else
             "a log-mel fbank front end instead of the paper's conv feature encoder")
    notes = (f"Scale `{scale}`: preset `{cfg.model}` ({preset(cfg.model).layers} blocks) with "
             f"{front}, radius {cfg.radius}, {cfg.pretrain.max_steps} pre-training and "
             f"{cfg.finetune.max_steps} fine-tuning updates per model; English of the embedded "
             f"corpus: {len(data.train)} train, {len(data.dev)} dev, {len(data.test)} test "
             f"utterances; {cfg.lm_order}-gram LM; LM weights chosen: {lm_w}. The diagnosis "
             f"suggests LMSABs in blocks: {suggested}. The corpus is synthetic speech; the "
             "tables have the paper's shape, computed by the command in `meta`.")
    # Say plainly when the models have not learned to transcribe (a reader would otherwise
    # compare variants whose differences are noise): the measured Viterbi rows decide.
    best = [r[6] for r in table.rows if r[2] == "None"]
    if best and min(best) >= 80.0:
        notes = ("**At this scale the fine-tuned models do not yet transcribe: the best Viterbi "
                 f"test CER is {min(best):.1f}%, so differences between the variants are not "
                 "the paper's effect.**\n\n" + notes)
    return notes


def local_attention_results(cfg: LocalAttentionConfig, data: LocalAttentionData,
                            plan: Sequence[Job], decoded: Mapping[Decode, object], out: Path,
                            scale: str) -> Results:
    """Table 1 (WER per model and decoding, and CER; each model's test WER reduction against
    Orig at the same decoding with its paired-bootstrap 95% interval), the diagnosis table and
    Fig. 2; every test hypothesis goes to ``hyps/<model>_<decoding>.txt`` (``speechlab score``
    reads them)."""
    variants = _decoded(plan, decoded, Transcription)
    diag = next((d for _, d in _decoded(plan, decoded, Diagnosis)), None)
    t1 = table1(data, variants, out)
    tables, figures = [t1], []
    if diag is not None:
        tables.append(diag.table)
        figures.append(Figure(diag.figure, "Attention maps of the pre-trained model (mean over "
                              "heads), dev utterances x blocks, each resized to 64 x 64 (Fig. 2)."))
    tables.append(training_table(out / "models", [j.name for j in plan if isinstance(j, TrainJob)],
                                 caption="Training: updates, best validation loss and its "
                                 "update, minutes."))
    return Results(title=f"wav2vec 2.0 local attention ({scale} scale)", tables=tables,
                   figures=figures, notes=_notes(cfg, data, scale, variants, diag, t1))
