"""Training and evaluation of the train-short / test-long experiment (see ``helpers.experiment``).

Notation: ``E`` members of an ensemble (one per seed), ``B`` batch, ``T`` positions, ``V``
vocabulary size, ``L`` the training length.

The seeds of one (task, variant) are trained together as one ``TinyEnsemble``: one optimiser
step trains every seed, each on its own stream of batches. Adam is elementwise and the gradient
is clipped per member, so every member follows exactly the path it would follow alone
(``tests/test_experiment.py`` checks this against a plain one-model loop).
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F

from ._experiment_model import TinyEnsemble, TinyTransformer
from .device import default_device

#: torch's ``clip_grad_norm_`` adds this to the norm before dividing.
_CLIP_EPS = 1e-6


def plateaued(losses, window: int, tolerance: float, floor: float) -> bool:
    """The stopping rule: the mean training loss of the last ``window`` steps improved on the mean
    of the ``window`` steps before by less than ``tolerance`` of it, or by less than ``floor`` nats.

    ``losses``: one member's training loss at every step so far (at least ``2 window`` of them).
    """
    losses = np.asarray(losses, dtype=np.float64)
    if len(losses) < 2 * window:
        return False
    last, before = losses[-window:].mean(), losses[-2 * window : -window].mean()
    return bool(before - last < max(tolerance * before, floor))


def masked_losses(logits, targets, mask):
    """Each member's mean cross-entropy and accuracy over its scored positions.

    Args:
        logits: ``(E, B, T, V)``; targets: int64 ``(E, B, T)``; mask: bool ``(E, B, T)``.

    Returns:
        ``(loss, accuracy)``, each ``(E,)``.
    """
    losses = F.cross_entropy(logits.permute(0, 3, 1, 2), targets, reduction="none")  # (E, B, T)
    count = mask.sum(dim=(1, 2))  # (E,)
    correct = ((logits.argmax(dim=-1) == targets) & mask).sum(dim=(1, 2))  # (E,)
    return (losses * mask).sum(dim=(1, 2)) / count, correct / count


def clip_per_member(ensemble: TinyEnsemble, max_norm: float = 1.0) -> torch.Tensor:
    """``clip_grad_norm_(member.parameters(), max_norm)`` for every member at once; returns the norms ``(E,)``."""
    grads = [p.grad for p in ensemble.parameters() if p.grad is not None]
    norms = torch.stack([g.pow(2).flatten(1).sum(dim=1) for g in grads]).sum(dim=0).sqrt()  # (E,)
    scale = (max_norm / (norms + _CLIP_EPS)).clamp(max=1.0)  # (E,)
    for g in grads:
        g.mul_(scale.view(-1, *([1] * (g.dim() - 1))))
    return norms


def train_ensemble(models, batches, config, *, device=None, progress=None):
    """Train the members ``models`` (``TinyTransformer``, one per seed) side by side until every
    member's training loss has plateaued (``plateaued``), or until ``config.max_steps``.

    Args:
        models: untrained ``TinyTransformer`` instances of one variant, each initialised by its seed.
        batches: a function ``step -> (inputs, targets, mask)``, each ``(E, B, L)``: member ``e``'s
            batch in row ``e``.
        config: an ``ExperimentConfig`` (learning rate, warm-up, plateau rule, cool-down, limits).
        device: where to train (default ``helpers.default_device()``).
        progress: called as ``progress(steps_done)`` every ``plateau_window`` steps, or None.

    Schedule: linear warm-up over ``warmup_steps``, then a constant rate. From ``min_steps`` on,
    every ``plateau_window`` steps, the plateau rule is applied to each member; once it holds for
    every member (or at ``max_steps``), the rate falls linearly to zero over ``cooldown_steps``.

    Returns:
        ``(ensemble, losses, stop)``: the trained ``TinyEnsemble`` (eval mode); ``losses``, a
        float64 array ``(E, steps)`` of each member's training loss at every step; ``stop``,
        ``{"stop_step": step where the cool-down began, "steps": steps in all, "plateaued": [bool]
        per member (the rule held at the last check)}``.
    """
    device = torch.device(device) if device is not None else default_device()
    ensemble = TinyEnsemble(models).to(device)
    optimizer = torch.optim.Adam(ensemble.parameters(), lr=config.learning_rate)
    history: list[np.ndarray] = []
    stop_step, met = None, np.zeros(ensemble.members, dtype=bool)
    step = 0
    ensemble.train()
    while stop_step is None or step < stop_step + config.cooldown_steps:
        if step < config.warmup_steps:
            rate = (step + 1) / config.warmup_steps
        elif stop_step is None:
            rate = 1.0
        else:
            rate = 1.0 - (step - stop_step) / config.cooldown_steps
        for group in optimizer.param_groups:
            group["lr"] = config.learning_rate * rate
        inputs, targets, mask = (z.to(device) for z in batches(step))  # (E, B, L) each
        loss, _ = masked_losses(ensemble(inputs), targets, mask)  # (E,)
        optimizer.zero_grad(set_to_none=True)
        loss.sum().backward()  # member e's parameters receive the gradient of loss[e] alone
        clip_per_member(ensemble, 1.0)
        optimizer.step()
        history.append(loss.detach().double().cpu().numpy())
        step += 1
        if stop_step is None and step % config.plateau_window == 0:
            if progress is not None:
                progress(step)
            if step >= config.min_steps:
                losses = np.stack(history, axis=1)  # (E, steps)
                met = np.array(
                    [
                        plateaued(row, config.plateau_window, config.plateau_tolerance, config.plateau_floor)
                        for row in losses
                    ]
                )
                if met.all() or step >= config.max_steps:
                    stop_step = step
        if stop_step is None and step >= config.max_steps:
            stop_step = step
    ensemble.eval()
    stop = {"stop_step": stop_step, "steps": step, "plateaued": [bool(v) for v in met]}
    return ensemble, np.stack(history, axis=1), stop


@torch.no_grad()
def evaluate_model(model: TinyTransformer, batches, lengths, train_length: int):
    """Loss and accuracy at each evaluation length, on the scored positions.

    Args:
        model: a trained ``TinyTransformer``.
        batches: a function ``length -> list of (inputs, targets, mask)``, each ``(B, T)``: the
            evaluation sequences (the same for every model).
        lengths: the evaluation lengths.
        train_length: ``L``; the ``*_beyond`` metrics count the positions ``t >= L`` only.

    Returns:
        ``(scores, per_position)``. ``scores``: ``{length: {"loss", "accuracy", "loss_beyond",
        "accuracy_beyond"}}``, the last two None at ``T <= L``. ``per_position``: at the longest
        length, ``{"loss": [...], "accuracy": [...]}``, the mean over the scored sequences at each
        position ``t`` (None where no sequence is scored).
    """
    device = next(model.parameters()).device
    lengths = [int(t) for t in lengths]
    scores, per_position = {}, None
    for length in lengths:
        position_loss = torch.zeros(length, dtype=torch.float64)
        position_correct = torch.zeros(length, dtype=torch.float64)
        position_count = torch.zeros(length, dtype=torch.float64)
        for inputs, targets, mask in batches(length):
            inputs, targets, mask = inputs.to(device), targets.to(device), mask.to(device)  # (B, T) each
            logits = model(inputs)  # (B, T, V)
            losses = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, T)
            correct = logits.argmax(dim=-1) == targets  # (B, T)
            position_loss += (losses * mask).sum(dim=0).double().cpu()
            position_correct += (correct & mask).sum(dim=0).double().cpu()
            position_count += mask.sum(dim=0).double().cpu()
        beyond = torch.arange(length) >= train_length
        row = {
            "loss": float(position_loss.sum() / position_count.sum()),
            "accuracy": float(position_correct.sum() / position_count.sum()),
            "loss_beyond": None,
            "accuracy_beyond": None,
        }
        if bool(beyond.any()):
            count = position_count[beyond].sum()
            row["loss_beyond"] = float(position_loss[beyond].sum() / count)
            row["accuracy_beyond"] = float(position_correct[beyond].sum() / count)
        scores[length] = row
        if length == max(lengths):
            scored = position_count > 0
            per_position = {
                name: [float(v / n) if ok else None for v, n, ok in zip(values, position_count, scored, strict=True)]
                for name, values in (("loss", position_loss), ("accuracy", position_correct))
            }
    return scores, per_position
