"""The experiments of the collection: tiny Transformers trained on a CPU in minutes.

- ``extrapolation`` (notebook 08): train short, test long: one small decoder with each position
  scheme, trained at length ``L`` and read up to ``8L``. Its public names are also this package's
  (``helpers.experiment.TinyEnsemble``, ``helpers.experiment.load_results``, ...).
- ``stretch`` (notebook 11): RoPE models trained at ``L``, stretched past it by the context-extension
  methods (position interpolation, NTK-aware, dynamic, YaRN, Llama 3), with and without fine-tuning;
  also ``helpers.stretch``.
- the parts both use: ``tasks`` (the synthetic tasks and the text corpus), ``model`` (the decoder
  and the ensemble that trains seeds side by side), ``train`` (the training loop and its stopping
  rule) and ``probes`` (what a trained model attends to).

Each regenerates its cache from the command line (the Makefile's ``make experiment`` and
``make experiment-stretch``)::

    python -m helpers.experiment --out data/extrapolation.json
    python -m helpers.experiment stretch --out data/stretch.json --models data/stretch_models.pt
"""

from . import extrapolation
from .extrapolation import *  # noqa: F401,F403

__all__ = list(extrapolation.__all__)
