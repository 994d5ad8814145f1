"""Checks that a model exported from a run is the model the run decoded with: the package,
loaded with nothing else from the run, gives the run's own hypotheses on its test set; so does
its ONNX package, for the models that export one (``speechlab export --format onnx``)."""

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
    ``with_language``); assert each text equals the run's. A model that exports ONNX graphs is
    also exported with ``format="onnx"`` (to ``package`` with ``-onnx`` appended) and its
    package checked the same way. Returns how many cuts were compared."""
    from lhotse import CutSet

    import speechlab

    speechlab.export(model_dir, package)
    models = [speechlab.load(package)]
    if "onnx" in models[0].capabilities:
        onnx = speechlab.export(model_dir, package.with_name(f"{package.name}-onnx"),
                                format="onnx")
        models.append(speechlab.load(onnx))
        assert models[-1].backend == "onnx"
    expected = read_hyps(hyps_file)
    compared = 0
    for cut in CutSet.from_file(cuts):
        if cut.id not in expected:
            continue
        language = cut.supervisions[0].language if with_language else None
        audio = cut.load_audio()[0]
        for model in models:
            got = model.transcribe(audio, cut.sampling_rate, language=language, **options)
            assert got.text == expected[cut.id], (cut.id, getattr(model, "backend", "torch"),
                                                  got.text, expected[cut.id])
        compared += 1
    assert compared, f"no cut of {cuts} has a hypothesis in {hyps_file}"
    return compared
