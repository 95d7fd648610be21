"""variance."""
