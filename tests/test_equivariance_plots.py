"""Figures of notebook 01: attention weights side by side and Gram matrices."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.plots import attention_pair, gram_matrices


def test_attention_pair_shows_both_matrices():
    a = torch.softmax(torch.arange(9.0).reshape(3, 3), dim=-1)
    b = a.flip(0).flip(1)
    drawing = attention_pair(a, b, ["cat", "chases", "dog"], ["dog", "chases", "cat"])
    left, right = drawing.artists["images"]
    np.testing.assert_allclose(left.get_array(), a.numpy())
    np.testing.assert_allclose(right.get_array(), b.numpy())
    labels = [t.get_text() for t in drawing.fig.axes[0].get_xticklabels()]
    assert labels == ["cat", "chases", "dog"]
    colour_bars = [ax for ax in drawing.fig.axes if ax not in (left.axes, right.axes)]
    assert len(colour_bars) == 2 and all("attention weight" in ax.get_ylabel() for ax in colour_bars)
    assert drawing.png().startswith(b"\x89PNG")


def test_attention_pair_rejects_mismatched_input():
    with pytest.raises(ValueError):
        attention_pair(torch.ones(3, 3), torch.ones(2, 2), "abc", "ab")
    with pytest.raises(ValueError):
        attention_pair(torch.ones(3, 3), torch.ones(3, 3), ["a", "b"], ["a", "b", "c"])
    with pytest.raises(ValueError):
        attention_pair(torch.ones(3, 2), torch.ones(3, 2), "abc", "abc")


def test_gram_matrices_titles_quote_the_ringed_values():
    grams = {"identity": np.eye(6), "ones": np.ones((6, 6))}
    drawing = gram_matrices(grams, pairs=((1, 3), (2, 4)))
    images = drawing.artists["images"]
    np.testing.assert_allclose(images[0].get_array(), np.eye(6))
    assert "p_mᵀ p_n" in drawing.fig.axes[-1].get_ylabel()  # the shared colour bar says what the colours are
    title = drawing.fig.axes[1].get_title()
    assert "G(1, 3) = +1.000" in title and "G(2, 4) = +1.000" in title
    with pytest.raises(ValueError):
        gram_matrices(grams, pairs=((1, 6),))
    with pytest.raises(ValueError):
        gram_matrices({"a": np.eye(3), "b": np.eye(4)})
    with pytest.raises(TypeError):
        gram_matrices([np.eye(3)])
