"""Training glue: where the model meets Lightning (one module per concept; docs/layout.md lists them)."""
