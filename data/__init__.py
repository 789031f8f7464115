"""The data pipeline: Tatoeba corpus -> leak-free splits -> BPE -> token-budget batches.

Knows nothing of the model: it hands out token-id tensors, vocabulary sizes and special ids.
The package itself imports nothing, so that ``data.lines`` or ``data.tokenizer`` come without
Lightning and ``datasets`` (``data.datamodule`` and ``data.splits`` bring those).
"""
