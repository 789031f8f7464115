"""Run loading for inference: a run folder read safely, turned into a translator. No Lightning.

``run_folder.py`` (the one checkpoint reader, the run's files and settings) and
``translator.py`` (model + tokenizer: text in, text out).
"""
