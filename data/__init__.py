"""The data pipeline: a parallel corpus (Tatoeba English–Spanish by default) -> leak-free splits -> BPE -> batches.

Knows nothing of the model: it hands out token-id tensors, vocabulary sizes and special ids.
The package itself imports nothing, so that ``data.lines`` or ``data.tokenizer`` come without
Lightning and ``datasets`` (``data.datamodule`` and ``data.splits`` bring those).
"""
