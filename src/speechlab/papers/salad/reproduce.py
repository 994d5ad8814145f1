"""``speechlab reproduce salad``: the SALAD paper's experiments end to end.

The embedded festival corpus (or any TTS corpus by ``--corpus``) -> linguistic and WORLD
features -> the four models of Table 1 trained with the shared trainer in the paper's stateful
arrangement (Adam for the RNNs, Noam for SALAD, early stopping on dev MCD) -> Table 2 (params,
MCD, F0 RMSE, V/UV accuracy, next to a baseline predicting each phone's mean training frame),
Fig. 2 (test F0 histograms), Fig. 3 and Table 3 (CPU inference time against generated duration
with a RANSAC fit) and a few synthesized test sentences to listen to.

This module holds the plan; the recipe and the data are :mod:`.recipe`, the tables
:mod:`.tables`, training, scoring and synthesis the library's (:mod:`speechlab.tts.training`,
:mod:`speechlab.tts.evaluate`, :mod:`speechlab.tts.synthesis`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from speechlab.experiment.jobs import Job
from speechlab.experiment.reproduction import Switch
from speechlab.report import Results
from speechlab.tts.features import TtsData
from speechlab.papers.salad.recipe import (Decode, DecodeOptions, ModelSpec, SaladConfig, SaladDecoding,
                                  Train, model_config, prepare_data, train_config)
from speechlab.papers.salad.tables import salad_results


class SaladPaper:
    """The SALAD paper (Pascual, Bonafonte, Serrà) as a
    :class:`~speechlab.experiment.reproduction.Reproduction`."""

    name = "salad"
    title = "SALAD: self-attention linguistic-acoustic decoder vs. the LSTM baseline"
    scales = ("ci", "demo", "small", "converged")
    demo_minutes = 2.5
    config_class = SaladConfig
    switches = (Switch("--no-stateful", ("task.stateful=false",),
                       "shuffle the training windows instead of the paper's stateful streams "
                       "(state and position carried between batches)"),)

    def prepare(self, cfg: SaladConfig, out: Path, corpus: Path | None, *,
                write: bool = True) -> TtsData:
        return prepare_data(cfg, out, corpus, write=write)

    def plan(self, cfg: SaladConfig) -> list[Job]:
        """A model per role of the recipe and its decoding. Costliest first: the big models,
        the RNNs before SALAD (an RNN is sequential over time)."""
        roles = sorted(cfg.roles(), key=lambda r: (r.size != "big", r.family != "rnn"))
        trains = [Train(r.name, ModelSpec(r, cfg.preset_of(r))) for r in roles]
        return [*trains, *(Decode(t.name, t, DecodeOptions(
            cfg.task.window if t.spec.role.family == "salad" else None)) for t in trains)]

    def train(self, job: Train, cfg: SaladConfig, data: TtsData, out: Path) -> None:
        from speechlab.tts.training import train_model

        role = job.spec.role
        train_model(model_config(cfg, role, data.input_dim), data, train_config(cfg, role),
                    cfg.task, out / "models" / job.name, epochs=cfg.epochs,
                    patience=cfg.patience, question_file=cfg.questions)

    def decode(self, job: Decode, cfg: SaladConfig, data: TtsData, out: Path) -> SaladDecoding:
        """Table 2's measures of the model in each attention mode, its F0 (Fig. 2) and the
        first ``cfg.examples`` test sentences synthesized (``samples/<model>/``)."""
        from speechlab.tts.acoustic import synthesize
        from speechlab.tts.evaluate import evaluate, output_conv_width
        from speechlab.tts.model import load, num_parameters
        from speechlab.tts.synthesis import write_wav
        from speechlab.tts.training import epochs_done

        model_dir = out / "models" / job.model.name
        model = load(model_dir)
        modes = {"full": evaluate(model, data.test, data.norm.outputs)}
        if job.options.window is not None:
            modes["window"] = evaluate(model, data.test, data.norm.outputs, job.options.window)
        main = modes.get("window", modes["full"])
        wavs = []
        for u, p in list(zip(data.test, main.predictions))[: cfg.examples]:
            rel = f"samples/{job.model.name}/{u.id}.wav"
            write_wav(out / rel, synthesize(data.norm.outputs.inverse(p)))
            wavs.append(rel)
        return SaladDecoding(job.model.spec.preset, num_parameters(model),
                             {m: e.scores for m, e in modes.items()}, main.f0[main.f0 > 0], wavs,
                             epochs_done(model_dir, data.train, cfg.task),
                             output_conv_width(model), {m: e.mcd_sums for m, e in modes.items()})

    def report(self, cfg: SaladConfig, data: TtsData, decoded: Mapping[Decode, SaladDecoding],
               out: Path, scale: str) -> Results:
        return salad_results(cfg, data, self.plan(cfg), decoded, out, scale)
