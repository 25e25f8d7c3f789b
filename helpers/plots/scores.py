"""Pictures for notebook 05: the four terms of the attention score (article 000 §7).

Notation: ``T`` positions, ``d_model`` width, ``x`` content ``(T, d_model)``, ``p`` position
vectors ``(T, d_model)``, ``W_Q, W_K`` projections ``(d_k, d_model)``, ``A = W_Qᵀ W_K``, and
``q_mᵀ k_n = (x_m + p_m)ᵀ A (x_n + p_n)`` split into content-content, content-position,
position-content and position-position (``helpers.score_terms``).

All five maps of ``score_term_maps`` share one colour scale: every entry is divided by the largest
``|entry|`` of the full score, so a term that is pale is a term that hardly moves the score.
"""

from __future__ import annotations

import numpy as np
import torch

from .._validate import check_float_tensor, check_int
from ..kernels import rotation_commuting_matrix, toeplitz_spread
from ..self_attention import score_terms
from ..sinusoidal import sinusoidal_pe
from ._drawing import Drawing, new_figure

__all__ = ["TERM_NAMES", "score_example", "score_term_maps"]

#: The four terms in reading order, with the labels the figures use.
TERM_NAMES = {
    "content_content": "content-content  x_mᵀA x_n",
    "content_position": "content-position  x_mᵀA p_n",
    "position_content": "position-content  p_mᵀA x_n",
    "position_position": "position-position  p_mᵀA p_n",
}


def score_example(T: int = 24, d_model: int = 64, seed: int = 0, *, dtype=torch.float64) -> dict:
    """Fixed random inputs for the four-term pictures: content, positions and three choices of ``A``.

    Content rows are ``N(0, I)`` (an embedding of variance ``1/d_model`` scaled by ``sqrt(d_model)``,
    article 001 §5.4), ``p = sinusoidal_pe(T, d_model)``; the projections are ``N(0, 1/d_model)``.

    Returns:
        dict with ``x`` ``(T, d_model)``, ``p`` ``(T, d_model)`` and ``weights``, a dict of
        ``(w_q, w_k)`` pairs, each ``(d_model, d_model)``: ``"general"`` (random), ``"identity"``
        (``A = I``) and ``"commuting"`` (``w_q = I``, ``w_k`` a ``rotation_commuting_matrix`` with
        random scales and angles, so ``A`` commutes with every block rotation).
    """
    T = check_int("T", T, minimum=1)
    d_model = check_int("d_model", d_model, minimum=2)
    if d_model % 2:
        raise ValueError(f"d_model must be even (sin/cos pairs), got {d_model}")
    generator = torch.Generator().manual_seed(check_int("seed", seed))
    x = torch.randn(T, d_model, generator=generator, dtype=dtype)  # (T, d_model)
    p = sinusoidal_pe(T, d_model, dtype=dtype)  # (T, d_model)
    scale = d_model**-0.5
    w_q = torch.randn(d_model, d_model, generator=generator, dtype=dtype) * scale  # (d_k, d_model)
    w_k = torch.randn(d_model, d_model, generator=generator, dtype=dtype) * scale
    eye = torch.eye(d_model, dtype=dtype)
    scales = 0.5 + torch.rand(d_model // 2, generator=generator, dtype=dtype)  # (d/2,)
    angles = (2 * torch.rand(d_model // 2, generator=generator, dtype=dtype) - 1) * np.pi  # (d/2,)
    commuting = rotation_commuting_matrix(scales, angles)  # (d_model, d_model)
    return {"x": x, "p": p, "weights": {"general": (w_q, w_k), "identity": (eye, eye), "commuting": (eye, commuting)}}


def score_term_maps(x, p, weights: dict, a: str = "general", content_weight: float = 1.0) -> Drawing:
    """Heat maps of the four terms and of the full score, and how far each is from Toeplitz
    (constant along every diagonal: entry ``(m, n)`` depends on ``Δ = m - n`` only).

    Args:
        x: content ``(T, d_model)``; it enters the score as ``content_weight * x``.
        p: position vectors ``(T, d_model)``.
        weights: ``{name: (w_q, w_k)}``, each ``(d_k, d_model)``; ``a`` picks one.
        a: the name of the weights to use.
        content_weight: the factor on the content (0 removes it).

    Parameters: ``a``, ``content_weight``. Artists: ``images`` (dict by term name, plus
    ``"full"``; each shows its matrix divided by max |full score|), ``bars`` (the spreads of
    ``kernels.toeplitz_spread``, same order as ``images``), ``bar_labels`` (one text per bar
    with its value to two decimals, so that a bar of height 0 still reads "0.00"), ``spreads``
    (a dict of floats, refreshed by every update).
    """
    x = check_float_tensor("x", x)
    p = check_float_tensor("p", p)
    if not isinstance(weights, dict) or not weights:
        raise TypeError(f"weights must be a non-empty dict of (w_q, w_k) pairs, got {type(weights).__name__}")
    if a not in weights:
        raise ValueError(f"a must be one of {sorted(weights)}, got {a!r}")
    # The terms are polynomials in the content weight c: c² x Ax, c x Ap, c p Ax, p Ap. Compute
    # them once per choice of A (at c = 1), then every slider step only rescales them.
    unit = {}
    for key, (w_q, w_k) in weights.items():
        terms = score_terms(x, p, w_q, w_k)  # four (T, T)
        unit[key] = {name: terms[name].detach().cpu().double().numpy() for name in TERM_NAMES}
    unit_spreads = {
        key: {name: float(toeplitz_spread(torch.from_numpy(m))) for name, m in terms.items()}
        for key, terms in unit.items()
    }
    powers = {"content_content": 2, "content_position": 1, "position_content": 1, "position_position": 0}

    fig, axes = new_figure(9.0, 5.6, ncols=3, nrows=2)
    names = [*TERM_NAMES, "full"]
    labels = {**TERM_NAMES, "full": "full score  q_mᵀk_n"}
    places = [axes[0, 0], axes[0, 1], axes[1, 0], axes[1, 1], axes[0, 2]]
    images = {}
    for name, ax in zip(names, places, strict=True):
        images[name] = ax.imshow(
            np.zeros((x.shape[0], x.shape[0])), cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest", aspect="equal"
        )
        ax.set_title(labels[name], fontsize=8.5)
        ax.set_xlabel("key position n", fontsize=8)
        ax.set_ylabel("query position m", fontsize=8)
        ax.tick_params(labelsize=7)
    colorbar = fig.colorbar(images["full"], ax=axes[0, 2], fraction=0.046, pad=0.04)
    colorbar.set_label("entry / max |full score|", fontsize=8)
    bar_ax = axes[1, 2]
    short = ["c-c", "c-p", "p-c", "p-p", "full"]
    bars = bar_ax.bar(short, np.zeros(5), color=["0.55", "0.55", "0.55", "#6a51a3", "black"])
    bar_labels = [
        bar_ax.text(bar.get_x() + bar.get_width() / 2, 0.0, "", ha="center", va="bottom", fontsize=7.5) for bar in bars
    ]
    bar_ax.set_ylim(0, 1.15)
    bar_ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    bar_ax.set_ylabel("spread along diagonals", fontsize=8)
    bar_ax.set_title("spread: 0 = depends on Δ = m − n only", fontsize=8.5)
    bar_ax.tick_params(labelsize=8)
    fig.subplots_adjust(left=0.07, right=0.93, bottom=0.09, top=0.88, wspace=0.45, hspace=0.45)
    suptitle = fig.suptitle(" ", fontsize=10)
    spreads: dict[str, float] = {}

    def update(a, content_weight):
        if a not in weights:
            raise ValueError(f"a must be one of {sorted(weights)}, got {a!r}")
        content_weight = float(content_weight)
        if not np.isfinite(content_weight) or content_weight < 0:
            raise ValueError(f"content_weight must be a finite number >= 0, got {content_weight}")
        terms = {name: content_weight ** powers[name] * unit[a][name] for name in TERM_NAMES}  # (T, T) each
        terms["full"] = sum(terms.values())  # (T, T)
        scale = float(np.abs(terms["full"]).max()) or 1.0
        for k, name in enumerate(names):
            images[name].set_data(terms[name] / scale)
            if name == "full":
                spreads[name] = float(toeplitz_spread(torch.from_numpy(terms[name])))
            else:  # the spread does not change when a matrix is multiplied by a number > 0
                spreads[name] = unit_spreads[a][name] if content_weight > 0 or powers[name] == 0 else 0.0
            bars[k].set_height(spreads[name])
            bar_labels[k].set_text(f"{spreads[name]:.2f}")
            bar_labels[k].set_y(spreads[name] + 0.01)
        suptitle.set_text(
            f"The four terms of the score: A = '{a}', content weight {content_weight:.3g} "
            f"(spread of the full score {spreads['full']:.3f})"
        )
        return None

    params = {"a": a, "content_weight": float(content_weight)}
    update(**params)
    artists = {"images": images, "bars": list(bars), "bar_labels": bar_labels, "spreads": spreads}
    return Drawing("score_term_maps", fig, update, params, artists, [*images.values(), *bars, *bar_labels, suptitle])
