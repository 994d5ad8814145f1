"""Checks that a model exported from a run is the model the run decoded with: the package,
loaded with nothing else from the run, gives the run's own hypotheses on its test set."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def read_hyps(path: Path) -> dict[str, str]:
    """``id text`` lines (``experiment.scoring.write_hyps``) as a dict."""
    out = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        uid, _, text = line.partition(" ")
        out[uid] = text
    return out


def package_decodes_as_run(model_dir: Path, package: Path, cuts: Path, hyps_file: Path, *,
                           with_language: bool = False, **options: Any) -> int:
    """Export ``model_dir`` to ``package``, move nothing, load the package and transcribe every
    test cut of ``cuts`` that ``hyps_file`` holds a hypothesis for (the language given when
    ``with_language``); assert each text equals the run's. Returns how many were compared."""
    from lhotse import CutSet

    import speechlab

    speechlab.export(model_dir, package)
    model = speechlab.load(package)
    expected = read_hyps(hyps_file)
    compared = 0
    for cut in CutSet.from_file(cuts):
        if cut.id not in expected:
            continue
        language = cut.supervisions[0].language if with_language else None
        got = model.transcribe(cut.load_audio()[0], cut.sampling_rate, language=language,
                               **options)
        assert got.text == expected[cut.id], (cut.id, got.text, expected[cut.id])
        compared += 1
    assert compared, f"no cut of {cuts} has a hypothesis in {hyps_file}"
    return compared
