"""The attention explorer: one self-contained HTML page (``explorer.html`` beside this file + the weights).

A page holds one or more *steps* (validations of a run, or one translation), each with one
or more sentences; a sentence holds its tokens and every weight of the three attention
types, rounded to 3 decimals and stored as integers in thousandths to keep files small.
No network, no CDN: the page opens from disk, and inside wandb's HTML panel.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

from data.atomic_file import write_text_atomically
from model.views import ATTENTION_TITLES, SentenceView

TEMPLATE = Path(__file__).with_name("explorer.html")


def sentence_record(view: SentenceView) -> dict:
    """One sentence pair: its texts, the token labels of each axis and the weights per kind.

    ``maps[kind][layer][head][query][key]`` are weights x 1000, rounded to integers; ``probabilities``: the
    model's probability of each output token, where the search gave them.
    """
    attention = view.attention.maps
    maps = {kind: [(layer.float() * 1000).round().int().tolist() for layer in getattr(attention, kind)]
            for kind in ATTENTION_TITLES if getattr(attention, kind)}  # a kind the model lacks is left out
    probabilities = None if view.output_log_probs is None else [round(math.exp(lp), 3) for lp in view.output_log_probs]
    return {"source": view.source, "translation": view.translation, "languages": list(view.languages),
            "src": view.src_tokens, "inputs": view.input_tokens, "outputs": view.output_tokens, "maps": maps,
            "probabilities": probabilities}


def explorer_data(steps: list[dict], title: str) -> dict:
    """What the page shows: ``steps``, each ``{"label": str, "sentences": [sentence_record, ...]}``."""
    return {"title": title, "kinds": ATTENTION_TITLES, "steps": steps}


def explorer_html(steps: list[dict], title: str) -> str:
    """The page for ``steps`` (``explorer_data``), the template filled in."""
    data = json.dumps(explorer_data(steps, title), ensure_ascii=False, separators=(",", ":"))
    # "<" as \u003c: no token ("</script>", "<!--") can end the data block early.
    data = data.replace("<", "\\u003c")
    before, after = TEMPLATE.read_text(encoding="utf-8").split("__DATA__")
    return before.replace("__TITLE__", html.escape(title)) + data + after


def write_explorer(path: str | Path, steps: list[dict], title: str) -> Path:
    """Write the page whole or not at all: a browser never shows a half-written file."""
    return write_text_atomically(path, explorer_html(steps, title))


def read_steps(folder: str | Path) -> list[dict]:
    """The step records saved as ``<folder>/step_*/attention.json``, in step order."""
    files = sorted(Path(folder).glob("step_*/attention.json"))
    return [json.loads(f.read_text(encoding="utf-8")) for f in files]
