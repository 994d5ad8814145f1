"""CTC-like models: the CTC-topologies paper (Zhao et al.) and the CTC loss every ASR paper uses.

- :mod:`.loss`: the plain CTC objective, and the graph loss of eqs. 1-6 over any topology;
- :mod:`.topology`: the eight ``Sx-Ty`` token topologies, written once as data, and their token
  FST ``T``;
- :mod:`.graph`: the numerator and denominator graphs of the graph loss as arrays
  (``_graph_numba`` holds their forward-backward kernels);
- :mod:`.phones`: lexicons and phone tokenizers (CMUdict, espeak-ng);
- :mod:`.model`, :mod:`.task`: the acoustic model and its training task;
- :mod:`.graphs`: lexicon ``L``, grammar ``G``, decoding graph ``T∘L∘G`` (eq. 7) and word
  training graph ``T∘L∘W`` (eq. 4);
- :mod:`.decode`: Viterbi decoding over the decoding graph (eq. 8);
- :mod:`.lattice`, :mod:`.lattice_metrics`: lattices, BPP and BHP (eqs. 10-11) and full-sum
  decoding over the lattice (eq. 9); :mod:`.prefix_search`: CTC prefix beam search;
- :mod:`.training`, :mod:`.transcribe`: one model trained on utterances with the graph loss; a
  set of utterances decoded with a trained model and a graph (acoustic weight tuned on dev,
  lattices measured, prefix searches);
- the reproduction: :mod:`.recipe` (config, jobs, data), :mod:`.reproduce` (the plan),
  :mod:`.tables`.
"""
