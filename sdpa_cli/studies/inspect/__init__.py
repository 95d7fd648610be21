"""The inspect study (issue 21): attention statistics of real checkpoints on real text."""
