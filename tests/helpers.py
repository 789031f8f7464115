"""Helpers shared by the tests: a tiny model, composing and running train.py, a tiny generated corpus."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from model.transformer import Seq2SeqTransformer

ROOT = Path(__file__).resolve().parents[1]
PAD, BOS, EOS = 0, 1, 2  # the special ids of this project's tokenizers
NO_VIEWS = "callbacks.attention_views.sentences=0"  # runs that test stopping and resuming draw nothing


def tiny_model(vocab: int = 20, seed: int = 0, **overrides) -> Seq2SeqTransformer:
    """A seeded small ``Seq2SeqTransformer`` (one joint vocabulary of ``vocab`` ids) in evaluation mode:
    d_model 32, 4 heads, 2+2 layers, d_ff 64, no dropout, 64 positions, unless ``overrides`` say otherwise."""
    torch.manual_seed(seed)
    shape = dict(d_model=32, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=64, dropout=0.0, max_len=64)
    return Seq2SeqTransformer(vocab, vocab, **(shape | overrides)).eval()


def head_weights(mha, head: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """W_Q, W_K, W_V of one head of a ``MultiHeadAttention``, each (d_head, d_model) as ``nn.Linear`` stores them."""
    inner = mha.num_heads * mha.d_head
    rows = slice(head * mha.d_head, (head + 1) * mha.d_head)
    return tuple(mha.in_proj_weight[i * inner :][rows] for i in range(3))  # type: ignore[return-value]


@torch.no_grad()
def sequence_log_prob(model: Seq2SeqTransformer, src: torch.Tensor, hyp: torch.Tensor, bos_id: int) -> torch.Tensor:
    """Total log-probability (B,) the model gives to hypotheses ``hyp`` (B, T), padding left out: a reference
    for the searches' own scores."""
    tgt_in = torch.cat([torch.full_like(hyp[:, :1], bos_id), hyp[:, :-1]], dim=1)
    token_lp = model(src, tgt_in).float().log_softmax(dim=-1).gather(-1, hyp[..., None]).squeeze(-1)  # (B, T)
    return token_lp.masked_fill(hyp == model.pad_id, 0.0).sum(dim=1)


NAMES = ["Tom", "Mary", "Ken", "Lucy", "Anna", "Paul"]


def tokenizer_with_slots():
    """A small joint BPE with copy slots, trained on sentences about six names (``<name1>`` … for any other)."""
    from data.tokenizer import TranslationTokenizer

    pairs = [(f"{name} sees the {thing}.", f"{name} ve la {cosa}.") for name in NAMES
             for thing, cosa in [("house", "casa"), ("dog", "perra"), ("station", "estación")]] * 5
    return TranslationTokenizer.train(pairs, vocab_size=300, copy_slots=True)


def compose_train(*overrides: str) -> DictConfig:
    """The config ``python train.py OVERRIDES`` would get (without Hydra's own node)."""
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return compose(config_name="train", overrides=list(overrides))


def train_in_process(run_dir: Path, data_cache: Path, *overrides: str) -> dict[str, float]:
    """``train.train(cfg)`` for ``experiment=smoke`` in this process: what the CLI does, minus Hydra's wrapper."""
    from train import train

    cfg = compose_train("experiment=smoke", f"paths.output_dir={run_dir}", f"data.cache_dir={data_cache}", *overrides)
    return train(cfg)


def train_command(run_dir: Path, data_cache: Path, *overrides: str) -> list[str]:
    """``python train.py experiment=smoke`` into ``run_dir``, its data in ``data_cache`` (run in ``ROOT``)."""
    return [sys.executable, str(ROOT / "train.py"), "experiment=smoke", f"hydra.run.dir={run_dir}",
            f"data.cache_dir={data_cache}", *overrides]


def run_train(run_dir: Path, data_cache: Path, *overrides: str, check: bool = True, **popen):
    """``python train.py experiment=smoke`` in a subprocess, as a user would run it."""
    command = train_command(run_dir, data_cache, *overrides)
    if popen:
        return subprocess.Popen(command, cwd=ROOT, **popen)
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if check:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def final_step(run_dir: Path) -> int:
    """The step of a run's ``final.ckpt``."""
    return torch.load(run_dir / "checkpoints" / "final.ckpt", weights_only=True)["global_step"]


def small_corpus(folder: Path, n: int = 300) -> Path:
    """A ``spa.txt`` of ``n`` generated pairs plus one malformed line."""
    path = folder / "spa.txt"
    rows = [f"Sentence number {i} is here.\tLa frase número {i} está aquí." for i in range(n)]
    path.write_text("\n".join(rows) + "\nmalformed line\n", encoding="utf-8")
    return path


def small_datamodule(folder: Path, **settings):
    """The data module on ``small_corpus`` (300-token BPE, 512-token batches, 10% validation and test), set up."""
    from data.datamodule import TranslationDataModule

    folder.mkdir(parents=True, exist_ok=True)
    datamodule = TranslationDataModule(corpus_path=str(small_corpus(folder)), cache_dir=str(folder / "cache"),
                                       vocab_size=300, max_tokens=512, val_fraction=0.1, test_fraction=0.1, **settings)
    datamodule.setup()
    return datamodule


def small_model(datamodule) -> Seq2SeqTransformer:
    """``tiny_model`` for ``small_datamodule``'s vocabulary, one layer each side, two heads."""
    return tiny_model(datamodule.src_vocab_size, num_heads=2, num_encoder_layers=1, num_decoder_layers=1)


def explorer_data(page: Path) -> dict:
    """The JSON an explorer page embeds (``model/views/explorer.py``), parsed back."""
    import json
    import re

    text = page.read_text(encoding="utf-8")
    found = re.search(r'<script id="attention-data" type="application/json">(.*?)</script>', text, flags=re.S)
    return json.loads(found.group(1))


def call(port: int, method: str, path: str, body: bytes | dict | None = None, headers: dict | None = None,
         timeout: float = 60) -> tuple[int, dict, bytes]:
    """One HTTP request to 127.0.0.1:``port``: (status, headers, body), whatever the status."""
    import http.client
    import json

    if isinstance(body, dict):
        body, headers = json.dumps(body).encode(), {"Content-Type": "application/json", **(headers or {})}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def post(port: int, body: dict, timeout: float = 60) -> dict:
    """``POST /translate`` answered 200: its JSON."""
    import json

    status, _, data = call(port, "POST", "/translate", body, timeout=timeout)
    assert status == 200, (status, data)
    return json.loads(data)


@contextlib.contextmanager
def serving(run, *options: str, env: dict[str, str] | None = None):
    """``translate.py run=RUN serve=true`` on a free local port, answering; Ctrl-C at the end (if still running).
    Yields (port, ended, process); once stopped, ``ended`` holds (exit code, stdout, stderr). ``env``: more
    environment variables for the server."""
    import signal
    import socket
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, str(ROOT / "translate.py"), f"run={run}", "serve=true",
                                f"port={port}", *options], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, **(env or {})},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    ended = []
    try:
        deadline = time.time() + 120
        while process.poll() is None and time.time() < deadline:
            try:
                post(port, {"lines": []}, timeout=5)
                break
            except OSError:
                time.sleep(0.2)
        yield port, ended, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        ended.extend((process.wait(timeout=60), process.stdout.read(), process.stderr.read()))


@contextlib.contextmanager
def file_size_limit(max_bytes: int):
    """A real full-disk fault for this process: the OS refuses to grow any file past ``max_bytes``
    (RLIMIT_FSIZE; Python ignores SIGXFSZ, so a write past it fails with EFBIG, "File too large")."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def limit_file_size(max_bytes: int):
    """``preexec_fn`` giving a child process that same fault (and the default Ctrl-C)."""
    def limit() -> None:
        import resource
        import signal

        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    return limit


def resident_kib(pid: int) -> int:
    """A process's resident memory, KiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))
