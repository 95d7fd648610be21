"""gradients."""
