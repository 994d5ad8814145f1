"""Read by the type checker only (``make typecheck``): each family's loaded model assigned to
the contract of its kind (:mod:`speechlab.contract`), so that a class that drifts from its
protocol fails the check. Importing it does nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from speechlab.asr.ctc.recognizer import CtcRecognizer
    from speechlab.asr.rnnt.recognizer import RnntRecognizer, RnntStream
    from speechlab.contract import Encoder, Recognizer, Stream, Synthesizer
    from speechlab.ssl.wav2vec2.recognizer import Wav2Vec2Encoder, Wav2Vec2Recognizer
    from speechlab.testing.toy_family import ToyRecognizer
    from speechlab.tts.synthesis import Synthesizer as TtsSynthesizer

    def _families_keep_their_contracts(rnnt: RnntRecognizer, stream: RnntStream,
                                       ctc: CtcRecognizer, w2v: Wav2Vec2Recognizer,
                                       encoder: Wav2Vec2Encoder, tts: TtsSynthesizer,
                                       toy: ToyRecognizer) -> None:
        recognizers: list[Recognizer] = [rnnt, ctc, w2v, toy]
        streams: list[Stream] = [stream]
        encoders: list[Encoder] = [encoder, w2v.encoder]
        synthesizers: list[Synthesizer] = [tts]
        del recognizers, streams, encoders, synthesizers
