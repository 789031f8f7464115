"""The Transformer core: attention from scratch, layers, the seq2seq model and search.

Plain ``nn.Module``s and functions, tensors in and tensors out: no Lightning, Hydra,
files or tokenizers here (those live in ``model/translator.py`` and ``data/``).
"""

from model.attention import Attention, KVCache, MultiHeadAttention, causal_mask
from model.search import beam_search, greedy_decode
from model.transformer import Seq2SeqTransformer

__all__ = [
    "Attention",
    "KVCache",
    "MultiHeadAttention",
    "Seq2SeqTransformer",
    "beam_search",
    "causal_mask",
    "greedy_decode",
]
