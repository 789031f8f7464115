"""Run loading for inference: a run folder read safely, turned into a translator, served or exported.
No Lightning (docs/layout.md lists the modules)."""
