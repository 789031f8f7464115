"""model/views/plotting.py: attention grids with tokens on the axes, one figure per attention type."""

import torch

from model.search import SentenceAttention
from model.transformer import AttentionMaps
from model.views import ATTENTION_TITLES, SentenceView
from model.views.plotting import attention_figures, attention_grid, save_figure


def random_maps(layers=2, heads=3, src=4, out=5):
    def rows(q, k):
        return torch.softmax(torch.randn(heads, q, k), dim=-1)

    return AttentionMaps([rows(src, src) for _ in range(layers)], [rows(out, out) for _ in range(layers)],
                         [rows(out, src) for _ in range(layers)])


def test_grid_has_a_panel_per_layer_and_head_with_token_labels():
    maps = random_maps()
    figure = attention_grid(maps.cross, list("vwxyz"), ["a", "b", "c", "<eos>"], "title", first_layer=1)
    axes = figure.axes
    assert len(axes) == 2 * 3
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["a", "b", "c", "<eos>"]
    assert [t.get_text() for t in axes[0].get_yticklabels()] == list("vwxyz")
    assert axes[4].get_title() == "layer 2 · head 2"
    image = axes[4].get_images()[0]
    torch.testing.assert_close(torch.tensor(image.get_array()), maps.cross[1][1])  # the weights themselves
    assert image.get_clim() == (0.0, 1.0)  # a fixed scale: rows are distributions


def test_figures_put_the_right_tokens_on_each_kind(tmp_path):
    src, inputs, outputs = ["I", "▁go", "<eos>"], ["<bos>", "Voy", "."], ["Voy", ".", "<eos>"]
    view = SentenceView(SentenceAttention([], [], [], random_maps(src=3, out=3)), src, inputs, outputs, "", "")
    figures = attention_figures(view, caption=" · test")
    assert list(figures) == list(ATTENTION_TITLES)
    labels = {kind: ([t.get_text() for t in f.axes[0].get_yticklabels()],
                     [t.get_text() for t in f.axes[0].get_xticklabels()]) for kind, f in figures.items()}
    assert labels == {"encoder_self": (src, src), "decoder_self": (outputs, inputs), "cross": (outputs, src)}
    assert figures["cross"]._suptitle.get_text() == ATTENTION_TITLES["cross"] + " · test"
    last = attention_figures(view, kinds=("cross",), last_layer_only=True)
    assert [a.get_title() for a in last["cross"].axes] == ["layer 2 · head 1", "layer 2 · head 2", "layer 2 · head 3"]
    save_figure(figures["cross"], tmp_path / "cross.png")
    assert (tmp_path / "cross.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
