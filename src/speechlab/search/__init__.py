"""Search shared by every decoder in speechlab: RNN-T and CTC prefix search, WFST later."""

from speechlab.search.beam import (
    MERGES,
    Beam,
    Hypothesis,
    log_add,
    merge_logadd,
    merge_max,
    select,
    topk_together,
)

__all__ = ["MERGES", "Beam", "Hypothesis", "log_add", "merge_logadd", "merge_max", "select",
           "topk_together"]
