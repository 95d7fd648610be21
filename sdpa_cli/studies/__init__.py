"""Studies: one module (or package) per study, `run(spec, ctx) -> Result`; see sdpa_cli.registry."""
