"""sdpa: measure, show and check why attention divides QKᵀ by √d_k."""

__version__ = "0.1.0"
