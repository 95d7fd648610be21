"""Study: gradients and rank collapse through a stack of attention blocks (issue 22).

The declaration (STUDY = Study(...)) lands with the lead's framework (issue 27); until then
sdpa_cli/registry.py's `_depth` loader names this package's spec, run and figures."""
