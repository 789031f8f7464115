"""model/inference/onednn.py: linear layers by oneDNN while searching on an AMD CPU, the same fp32 math."""

import contextlib

import torch
import torch.nn.functional as F

from helpers import BOS, EOS, PAD, tiny_model
from model.inference import onednn
from model.inference.onednn import OneDNNLinear, fast_linear, onednn_available
from model.search import SearchConfig, search

ONEDNN = OneDNNLinear if onednn_available() else contextlib.nullcontext  # its math on any x86 CPU, whichever maker's


def test_a_linear_layer_gives_the_fp32_result_through_onednn():
    torch.manual_seed(0)
    x, weight, bias = torch.randn(3, 7, 32), torch.randn(48, 32), torch.randn(48)
    exact = F.linear(x.double(), weight.double(), bias.double())
    before = OneDNNLinear.calls
    with torch.no_grad(), ONEDNN():
        fast = F.linear(x, weight, bias)
        plain = torch.nn.functional.linear(x, weight)  # without a bias too
    assert fast.dtype == torch.float32 and fast.shape == (3, 7, 48)
    torch.testing.assert_close(fast.double(), exact, rtol=1e-5, atol=1e-5)  # fp32 accuracy, not bf16's
    torch.testing.assert_close(plain, F.linear(x, weight), rtol=1e-5, atol=1e-5)
    assert OneDNNLinear.calls - before == (2 if onednn_available() else 0)
    with ONEDNN():  # gradients wanted: left to PyTorch's own linear
        x.requires_grad_(True)
        F.linear(x, weight).sum().backward()
    assert x.grad is not None and OneDNNLinear.calls - before == (2 if onednn_available() else 0)


def test_the_search_gives_the_same_outputs_with_and_without_it():
    model = tiny_model(30, seed=3)
    torch.manual_seed(4)
    src = torch.randint(3, 30, (16, 9))
    src[:, -1] = EOS
    src[::3, 5:] = PAD
    for beam_size in (1, 4):
        config = SearchConfig(beam_size=beam_size)
        with ONEDNN():
            fast = search(model, src, BOS, EOS, config)
        assert [o.ids for o in fast] == [o.ids for o in search(model, src, BOS, EOS, config)]


def test_it_is_chosen_on_an_amd_cpu_only(monkeypatch):
    monkeypatch.setattr(onednn, "AMD_CPU", True)
    assert isinstance(fast_linear(torch.device("cpu")), OneDNNLinear) == onednn_available()  # built in, x86
    assert isinstance(fast_linear(torch.device("meta")), contextlib.nullcontext)  # not a CPU
    monkeypatch.setattr(onednn, "AMD_CPU", False)  # Intel's: MKL's sgemm was the faster (docs/results.md)
    assert isinstance(fast_linear(torch.device("cpu")), contextlib.nullcontext)
