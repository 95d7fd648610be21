"""worked_example."""
