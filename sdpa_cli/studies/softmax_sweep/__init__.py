"""softmax_sweep."""
