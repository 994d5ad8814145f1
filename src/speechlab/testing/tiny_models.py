"""Tiny untrained models of every kind, written as directories ``speechlab.load`` reads: a
CTC S1-T1 recognizer with its decoding graph over a six-word lexicon, a wav2vec 2.0 encoder
and a SALAD acoustic model with its normalizers and question set (packages), and a Hugging
Face wav2vec 2.0 CTC directory. Each builds in about a second; tests of what serves or shows
models (``speechlab serve``) use them where no trained model is needed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

LEXICON = {"yes": [["y", "eh", "s"]], "no": [["n", "ow"]], "go": [["g", "ow"]],
           "stop": [["s", "t", "aa", "p"]], "on": [["aa", "n"]], "off": [["ao", "f"]]}
SENTENCES = [["yes"], ["no"], ["go", "on"], ["stop"], ["go"], ["no", "stop"], ["yes", "go"],
             ["off"], ["go", "off"], ["on"]]


def ctc_package(out: str | Path, topology: str = "S1-T1", seed: int = 0,
                sharpen: float = 8.0) -> Path:
    """A CTC recognizer of ``topology`` (the ``tiny`` preset, random weights with the output
    layer scaled by ``sharpen`` so that some paths stand out) with T∘L∘G over
    :data:`LEXICON` and a bigram LM of :data:`SENTENCES`, as a package at ``out``."""
    import tempfile

    from speechlab.asr.ctc.decode import ViterbiConfig
    from speechlab.asr.ctc.graphs import decoding_graph, grammar_fst, make_lang
    from speechlab.asr.ctc.model import build, preset
    from speechlab.asr.ctc.phones import PhoneTokenizer
    from speechlab.asr.ctc.recognizer import CtcRecognizer
    from speechlab.audio.transforms import GlobalCMVN
    from speechlab.package import write_package
    from speechlab.text.lexicon import Lexicon
    from speechlab.text.ngram import NgramConfig, estimate

    lexicon = Lexicon(LEXICON)
    tokenizer = PhoneTokenizer(lexicon, "en")
    lang = make_lang(lexicon, tokenizer.phones)
    with tempfile.TemporaryDirectory() as tmp:
        arpa = Path(tmp) / "lm.arpa"
        estimate(SENTENCES, NgramConfig(order=2, discount=0.5)).write(arpa)
        graph = decoding_graph(topology, lang, grammar_fst(arpa, lang))
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = build(preset("tiny", graph.num_tokens, topology=topology, language="en"))
            with torch.no_grad():
                model.output.weight.mul_(sharpen)
        cmvn = GlobalCMVN(dim=80)
        cmvn.mean.fill_(-8.0)  # about the level of quiet speech's log-mel energies
        cmvn.std.fill_(4.0)
        rec = CtcRecognizer(model.eval(), tokenizer, cmvn, graph, topology=topology,
                            viterbi=ViterbiConfig(beam=16.0, max_active=200), arpa=arpa)
        card, weights, files = rec.to_package()
        return write_package(out, card, weights, files, overwrite=True)


def wav2vec2_package(out: str | Path, preset: str = "ci", seed: int = 0,
                     local_blocks: tuple[int, ...] = (), radius: int = 4) -> Path:
    """A pre-trained-shaped wav2vec 2.0 encoder (random weights; ``local_blocks`` made local
    attention of ``radius`` frames) as a package at ``out``."""
    from speechlab.package import write_package
    from speechlab.ssl.wav2vec2 import build
    from speechlab.ssl.wav2vec2.recognizer import Wav2Vec2Encoder

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = build(preset, local_blocks, radius)
    card, weights, files = Wav2Vec2Encoder(model.eval(), normalize=True).to_package()
    return write_package(out, card, weights, files, overwrite=True)


def salad_package(out: str | Path, preset: str = "tiny_salad", seed: int = 0) -> Path:
    """A SALAD acoustic model (random weights) with neutral normalizers and the project's
    English question set, as a package at ``out``: it speaks (noise with an F0 track)."""
    from speechlab.package import write_package
    from speechlab.tts.acoustic import BAP, DIMS, LF0, VUV, OutputNormalizer
    from speechlab.tts.labels import InputNormalizer
    from speechlab.tts.model import build_from_config
    from speechlab.tts.model import preset as tts_preset
    from speechlab.tts.questions import english_questions, load_questions
    from speechlab.tts.synthesis import Synthesizer

    questions = load_questions()
    real = questions.dim - len(questions.binary)
    inputs = InputNormalizer(len(questions.binary), questions.dim, np.zeros(real), np.ones(real))
    # The model's [0, 1] outputs mapped to a quiet spectral envelope, F0 of 100-160 Hz,
    # mostly periodic and voiced frames.
    low, high = np.full(DIMS, -0.3), np.full(DIMS, 0.3)
    low[0], high[0] = -5.0, -3.0
    low[LF0], high[LF0] = np.log(100.0), np.log(160.0)
    low[BAP], high[BAP] = -20.0, -2.0
    low[VUV], high[VUV] = 0.2, 1.2
    outputs = OutputNormalizer(low, high)
    cfg = tts_preset(preset, input_dim=questions.dim + 2)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = build_from_config(cfg).eval()
    synth = Synthesizer(model, inputs, outputs, 40, questions, Path(out), window=120,
                        question_text=english_questions())
    card, weights, files = synth.to_package()
    return write_package(out, card, weights, files, overwrite=True)


HF_VOCAB = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "|": 4, "E": 5, "T": 6, "A": 7, "O": 8,
            "N": 9, "I": 10, "H": 11}


def hf_ctc_directory(out: str | Path, seed: int = 0) -> Path:
    """A tiny random ``Wav2Vec2ForCTC`` saved with its processor, as a user's Hugging Face
    directory is (needs transformers, a test dependency); its CTC head is sharpened so that
    the greedy path holds words."""
    import json

    from transformers import (Wav2Vec2Config, Wav2Vec2CTCTokenizer, Wav2Vec2FeatureExtractor,
                              Wav2Vec2ForCTC, Wav2Vec2Processor)

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "vocab.json").write_text(json.dumps(HF_VOCAB))
    processor = Wav2Vec2Processor(feature_extractor=Wav2Vec2FeatureExtractor(do_normalize=True),
                                  tokenizer=Wav2Vec2CTCTokenizer(str(out / "vocab.json")))
    cfg = Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 4),
                         conv_kernel=(10, 8), num_conv_pos_embeddings=16,
                         num_conv_pos_embedding_groups=2, vocab_size=len(HF_VOCAB),
                         pad_token_id=0)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Wav2Vec2ForCTC(cfg).eval()
        with torch.no_grad():
            model.lm_head.weight.mul_(30.0)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out
