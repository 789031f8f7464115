"""Linear layers by oneDNN while searching on an AMD CPU: the same fp32 math, faster there.

PyTorch multiplies fp32 matrices on a CPU with MKL's sgemm, which on AMD processors does not use their AVX-512
units; oneDNN, which PyTorch also ships, does, at the decoder's shapes (a few hundred hypotheses × d_model, times the
vocabulary), with every output on the test split unchanged; on Intel's, MKL's is the faster (docs/results.md,
"Inference"). The model code stays as it is: a ``TorchFunctionMode`` sends each ``F.linear`` (the projections of
``MultiHeadAttention``, ``nn.Linear`` in the feed-forward blocks and the output layer) to oneDNN's while it is active.
"""

from __future__ import annotations

import contextlib
import platform
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

LINEAR = (F.linear, torch._C._nn.linear)
CPUINFO = Path("/proc/cpuinfo")  # Linux's; elsewhere the processor's name says the maker (Windows: "... AuthenticAMD")
AMD_CPU = "AuthenticAMD" in (CPUINFO.read_text() if CPUINFO.is_file() else platform.processor())


def onednn_available() -> bool:
    """oneDNN's linear is built into this PyTorch, on an x86 CPU (elsewhere it brings nothing measured)."""
    return (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
            and platform.machine().lower() in ("x86_64", "amd64"))


class OneDNNLinear(TorchFunctionMode):
    """While active, fp32 ``F.linear`` on a CPU tensor without gradient runs in oneDNN; all else as before."""

    calls = 0  # linear layers sent to oneDNN (for tests)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in LINEAR:
            x, weight, bias = args[0], args[1], args[2] if len(args) > 2 else (kwargs or {}).get("bias")
            if x.device.type == "cpu" and x.dtype == weight.dtype == torch.float32 and not torch.is_grad_enabled():
                OneDNNLinear.calls += 1
                return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
        return func(*args, **(kwargs or {}))


def fast_linear(device: torch.device) -> contextlib.AbstractContextManager:
    """``OneDNNLinear()`` for a search on an AMD x86 CPU, else nothing (PyTorch's own: MKL's sgemm on Intel's)."""
    return OneDNNLinear() if device.type == "cpu" and AMD_CPU and onednn_available() else contextlib.nullcontext()
