"""The Transformer core: attention from scratch, embeddings, layers, the seq2seq model and search.

Plain ``nn.Module``s and functions, tensors in and tensors out: no Lightning, Hydra, files or
tokenizers at this level. Around it, one subpackage each:

- ``model.training``: the LightningModule, learning-rate schedule, metrics, the training callbacks;
- ``model.scoring``: a trained model's outputs scored (test report, pasted text, confidence, alignment, time to quality);
- ``model.views``: attention pictures, the explorer page, attention statistics and the callback writing them;
- ``model.inference``: reading a run folder safely and translating with it (no Lightning).
"""

from model.attention import Attention, KVCache, MultiHeadAttention, causal_mask
from model.search import SearchConfig, beam_search, greedy_decode, sentence_attention
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
    "sentence_attention",
]
# ``search()`` itself is imported from ``model.search``: a package attribute of that name
# would hide the submodule (and Hydra's ``_target_: model.search.SearchConfig``).
