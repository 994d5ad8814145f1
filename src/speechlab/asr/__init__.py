"""Speech recognition: the data every ASR paper shares (:mod:`speechlab.asr.data`), the
multi-softmax RNN-T family (:mod:`speechlab.asr.rnnt`) and CTC-like models (:mod:`speechlab.asr.ctc`)."""
