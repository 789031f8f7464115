"""Scoring a run: what reads a trained model's outputs (the test report, pasted text, confidence, alignment, time to
quality), translating through the ``Translator`` only, so that what is scored is what users get."""
