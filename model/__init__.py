"""The Transformer core: attention from scratch, layers, the seq2seq model and search.

Plain ``nn.Module``s and functions, tensors in and tensors out: no Lightning, Hydra,
files or tokenizers here. Around it: ``translation_module.py`` (the LightningModule),
``translator.py`` (loading a run folder for ``translate.py``), ``metrics.py``, ``plotting.py``
and ``schedule.py``.
"""

from model.attention import Attention, KVCache, MultiHeadAttention, causal_mask
from model.search import SearchConfig, beam_search, greedy_decode
from model.transformer import Seq2SeqTransformer

__all__ = [
    "Attention",
    "KVCache",
    "MultiHeadAttention",
    "SearchConfig",
    "Seq2SeqTransformer",
    "beam_search",
    "causal_mask",
    "greedy_decode",
]
# ``search()`` itself is imported from ``model.search``: a package attribute of that name
# would hide the submodule (and Hydra's ``_target_: model.search.SearchConfig``).
