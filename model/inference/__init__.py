"""Run loading for inference: a run folder read safely, turned into a translator or exported. No Lightning."""
