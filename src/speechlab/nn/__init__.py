"""Building blocks shared by every model family (masks over padded batches, ...)."""

from speechlab.nn.mask import lengths_to_mask

__all__ = ["lengths_to_mask"]
