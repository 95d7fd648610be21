"""saturation."""
