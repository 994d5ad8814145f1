"""Search shared by every decoder in speechlab (RNN-T now, CTC prefix and WFST search later)."""

from speechlab.search.beam import (
    MERGES,
    Beam,
    Hypothesis,
    log_add,
    merge_logadd,
    merge_max,
    topk_together,
)

__all__ = ["MERGES", "Beam", "Hypothesis", "log_add", "merge_logadd", "merge_max", "topk_together"]
