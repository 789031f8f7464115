"""The data pipeline: Tatoeba corpus -> leak-free splits -> BPE -> token-budget batches.

Knows nothing of the model: it hands out token-id tensors, vocabulary sizes and special ids.
"""

from data.datamodule import TranslationDataModule
from data.tokenizer import TranslationTokenizer

__all__ = ["TranslationDataModule", "TranslationTokenizer"]
