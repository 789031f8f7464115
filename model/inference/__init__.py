"""Run loading for inference: a run folder read safely, turned into a translator. No Lightning.

``run_folder.py`` (the one checkpoint reader, the run's files and settings), ``translator.py``
(model + tokenizer: text in, text out), ``server.py`` (the local page and JSON API, FastAPI),
``export.py`` and ``ctranslate2_engine.py`` (the same weights in CTranslate2).
"""
