"""Training glue: where the model meets Lightning.

``translation_module.py`` (the LightningModule: loss, BLEU), ``schedule.py`` (learning rate),
``checkpoint_io.py`` (atomic writes, the resume point), ``interrupt.py`` (saving on a signal),
``precision.py`` (the bf16-or-fp32 probe) and ``metrics.py`` (sacreBLEU scores).
"""
