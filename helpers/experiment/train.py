"""Training and evaluation of the train-short / test-long experiment (see ``helpers.experiment``).

Notation: ``E`` members of an ensemble (one per seed), ``B`` batch, ``T`` positions, ``V``
vocabulary size, ``L`` the training length.

The seeds of one (task, variant) are trained together as one ``TinyEnsemble``: one optimiser
step trains every seed, each on its own stream of batches. Each seed keeps its own schedule (it
stops when its own loss has plateaued), and Adam is elementwise and the gradient is clipped per
member, so every member computes what it would compute alone: the same sums of the same numbers.
Not always in the same order: a batched product may add in another order than a single model's,
so a member and the same seed trained alone agree to float32 rounding at first and can part after
tens of steps, as any two runs whose last bits differ do (``tests/test_experiment.py`` checks the
first steps against a seed alone, and the mathematics against a plain one-model loop).
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F

from ..device import default_device
from .model import TinyEnsemble, TinyTransformer

#: torch's ``clip_grad_norm_`` adds this to the norm before dividing.
_CLIP_EPS = 1e-6


def plateaued(losses, window: int, tolerance: float, floor: float, lookback: int = 1) -> bool:
    """The stopping rule: the mean training loss of the last ``window`` steps improved on the mean
    of an earlier ``window`` steps by less than ``tolerance`` of it, or by less than ``floor`` nats.

    The earlier window is the one that ended ``lookback - 1`` windows before the last began
    (``lookback = 1``: the window just before; ``lookback = 3``: the trend over four windows, so
    that a slow descent over many steps is not taken for a plateau).

    ``losses``: one member's training loss at every step so far (at least ``(lookback + 1) window``).
    """
    if len(losses) < (lookback + 1) * window:
        return False
    return bool(improvement(losses, window, lookback) < max(tolerance, floor / _earlier(losses, window, lookback)))


def _earlier(losses, window, lookback):
    losses = np.asarray(losses, dtype=np.float64)
    if len(losses) < (lookback + 1) * window:
        return np.inf
    return max(losses[-(lookback + 1) * window : -lookback * window].mean(), 1e-300)


def improvement(losses, window: int, lookback: int = 1) -> float:
    """How much the last ``window`` steps' mean loss improved on the earlier window the rule reads,
    as a fraction of the earlier mean (``-inf`` before there are ``(lookback + 1) window`` steps)."""
    losses = np.asarray(losses, dtype=np.float64)
    if len(losses) < (lookback + 1) * window:
        return -np.inf
    before = _earlier(losses, window, lookback)
    return float((before - losses[-window:].mean()) / before)


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
    """Train the members ``models`` (``TinyTransformer``, one per seed) side by side, each until its
    own training loss has plateaued (``plateaued``) or until ``config.max_steps``.

    Args:
        models: untrained ``TinyTransformer`` instances of one variant, each initialised by its seed.
        batches: a function ``members -> (inputs, targets, mask)``, each ``(k, B, L)``: row ``j`` is
            the next training batch of member ``members[j]`` (a list of ``k`` member indices). It
            is called once per step for the members that train in that step, so each member reads
            its own stream of batches in order, whoever trains beside it.
        config: an ``ExperimentConfig`` (learning rate, warm-up, plateau rule, cool-down, limits).
        device: where to train (default ``helpers.default_device()``).
        progress: called as ``progress(step)`` every ``plateau_window`` steps, or None.

    Every member has its own schedule: linear warm-up over ``warmup_steps``, then a constant rate.
    From ``min_steps`` on, every ``plateau_window`` steps, the plateau rule is applied to each member
    still at the constant rate; a member for which it holds (or every member, at ``max_steps``)
    begins its cool-down, the rate falling linearly to zero over ``cooldown_steps``, and then stops.

    The members that share a phase train as one ``TinyEnsemble`` (a "cohort"). When some members
    begin their cool-down, they leave with their parameters and their Adam state to form a cohort
    of their own; a cohort that has cooled down leaves training. Adam is elementwise and the
    gradient is clipped per member, so a member's path depends on its own batches and losses only
    (up to the order in which batched products add: see the module's note), and a member that
    finishes early costs nothing after.

    Returns:
        ``(models, losses, stops)``, one entry per member: the trained ``TinyTransformer`` (eval
        mode); a float64 array of its training loss at every step it trained; and
        ``{"stop_step": step where its cool-down began, "steps": steps it trained, "plateaued": whether
        the rule held (False for a member stopped by max_steps)}``.
    """
    device = torch.device(device) if device is not None else default_device()
    models = list(models)
    if not models:
        raise ValueError("models must hold at least one TinyTransformer")
    if config.warmup_steps > config.min_steps:
        raise ValueError(f"config.warmup_steps must be <= min_steps ({config.min_steps}), got {config.warmup_steps}")
    first = TinyEnsemble(models).to(device)
    cohorts = [_Cohort(list(range(len(models))), first, _adam(first, config), None)]
    history: list[list[float]] = [[] for _ in models]
    trained: list = [None] * len(models)
    stops: list = [None] * len(models)
    step = 0
    while cohorts:
        for cohort in cohorts:
            if step < config.warmup_steps:
                rate = (step + 1) / config.warmup_steps
            elif cohort.cool_from is None:
                rate = 1.0
            else:
                rate = 1.0 - (step - cohort.cool_from) / config.cooldown_steps
            for group in cohort.optimizer.param_groups:
                group["lr"] = config.learning_rate * rate
            inputs, targets, mask = (z.to(device) for z in batches(list(cohort.members)))  # (k, B, L) each
            loss, _ = masked_losses(cohort.ensemble(inputs), targets, mask)  # (k,)
            cohort.optimizer.zero_grad(set_to_none=True)
            loss.sum().backward()  # member j's parameters receive the gradient of loss[j] alone
            clip_per_member(cohort.ensemble, 1.0)
            cohort.optimizer.step()
            for e, value in zip(cohort.members, loss.detach().double().cpu().tolist(), strict=True):
                history[e].append(value)
        step += 1
        for cohort in [c for c in cohorts if c.cool_from is not None and step == c.cool_from + config.cooldown_steps]:
            cohort.ensemble.eval()
            for j, e in enumerate(cohort.members):
                trained[e] = cohort.ensemble.member(j)
                stops[e]["steps"] = step
            cohorts.remove(cohort)
        live = next((c for c in cohorts if c.cool_from is None), None)
        checking = step % config.plateau_window == 0 and step >= config.min_steps
        if progress is not None and step % config.plateau_window == 0:
            progress(step)
        if live is None or not (checking or step >= config.max_steps):
            continue
        held = [
            plateaued(
                history[e],
                config.plateau_window,
                config.plateau_tolerance,
                config.plateau_floor,
                config.plateau_lookback,
            )
            for e in live.members
        ]
        leaving = [j for j, h in enumerate(held) if h or step >= config.max_steps]
        if not leaving:
            continue
        for j in leaving:
            gain = improvement(history[live.members[j]], config.plateau_window, config.plateau_lookback)
            stops[live.members[j]] = {
                "stop_step": step,
                "steps": None,
                "plateaued": held[j],
                "improvement": None if not np.isfinite(gain) else round(gain, 5),
            }
        staying = [j for j in range(len(live.members)) if j not in leaving]
        cohorts.remove(live)
        cohorts.append(_split(live, leaving, config, cool_from=step))
        if staying:
            cohorts.append(_split(live, staying, config, cool_from=None))
    return trained, [np.asarray(h, dtype=np.float64) for h in history], stops


class _Cohort:
    """Members that train in the same phase: their indices, one ``TinyEnsemble`` and its Adam."""

    def __init__(self, members: list, ensemble: TinyEnsemble, optimizer, cool_from):
        self.members, self.ensemble, self.optimizer, self.cool_from = members, ensemble, optimizer, cool_from


def _adam(ensemble: TinyEnsemble, config):
    return torch.optim.Adam(ensemble.parameters(), lr=config.learning_rate)


def _split(cohort: _Cohort, rows: list, config, *, cool_from) -> _Cohort:
    """The members at ``rows`` of ``cohort`` as a cohort of their own, carrying their Adam state."""
    ensemble = cohort.ensemble.select(rows)
    optimizer = _adam(ensemble, config)
    index = torch.tensor(rows, device=next(ensemble.parameters()).device)
    for name, new in ensemble.stacked.items():
        old = cohort.ensemble.stacked[name]
        if old not in cohort.optimizer.state:
            continue
        optimizer.state[new] = {
            key: value.index_select(0, index).clone() if torch.is_tensor(value) and value.dim() > 0 else _copy(value)
            for key, value in cohort.optimizer.state[old].items()
        }  # exp_avg and exp_avg_sq (E, ...) sliced; the step count copied
    return _Cohort([cohort.members[j] for j in rows], ensemble, optimizer, cool_from)


def _copy(value):
    return value.clone() if torch.is_tensor(value) else value


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
