"""helpers: the encoding and attention code that every notebook of the collection imports.

Pure functions on tensors; device and dtype follow the input or the ``device=`` / ``dtype=``
arguments. Each module's docstring gives its notation and conventions.

The maths, which ``import helpers`` loads (torch, numpy; SciPy when ``continuous_kernel`` first
needs its cosine integral), one module a subject:

- ``sinusoidal``: the sinusoidal table of Vaswani et al. and its shift matrices (articles 000, 001);
- ``rope``: rotary position embedding, its scalings (linear, NTK-aware, dynamic, YaRN, Llama 3,
  LongRoPE) and ``rope_config`` reading a model's config the way transformers does (article 003);
- ``alibi``: ALiBi's slopes and biases; ``relative``: T5's buckets and Shaw et al.'s relative
  positions;
- ``kernels``: the position kernel and the matrices that commute with a shift (article 000, section 6);
- ``self_attention``: causal attention with an optional bias, and the score in four terms;
- ``model_catalog``: the published RoPE settings of real models (``data/rope_models.json``);
- ``checks``: detectors that test someone's RoPE, ALiBi, sinusoidal table, positions or KV-cache
  decoding and name the fault they find;
- ``device``: the default device and what it supports.

The teaching rooms, imported on first use so that an engineer who uses the maths pays neither the
seconds nor the packages of the figures and sliders (the distribution's ``teaching`` extra installs
them; ``tests/test_packaging.py`` checks that they stay unloaded): ``helpers.plots`` (matplotlib),
``helpers.widgets`` (ipywidgets), ``helpers.exercises``, and ``helpers.experiment``, the training
experiments of notebooks 08 and 11 (``helpers.stretch`` is ``helpers.experiment.stretch``).
"""

import importlib as _importlib
import importlib.abc as _importlib_abc
import sys as _sys

from . import checks
from .alibi import alibi_bias, alibi_decay_distance, alibi_key_bias, alibi_slopes
from .device import ENV_DEVICE, default_device, supports_float64
from .kernels import (
    block_rotation,
    continuous_kernel,
    position_kernel,
    rotation_commuting_matrix,
    toeplitz_projection,
    toeplitz_spread,
)
from .model_catalog import LAYER_KINDS, PAIR_LAYOUTS, ROPE_MODELS_PATH, ModelRope, model_rope, rope_layers, rope_models
from .relative import ShawRelativeBias, T5RelativeBias, relative_position_bucket, relative_positions
from .rope import (
    LAYOUTS,
    SCALING_TYPES,
    apply_rope,
    apply_rope_qk,
    rope_cos_sin,
    rope_frequencies,
    rope_from_config,
    rope_gather,
    rope_settings_from_config,
    yarn_correction_range,
)
from .self_attention import attention, causal_mask, score_terms
from .sinusoidal import frequencies, nearest_collision, shift_distance, shift_matrix, sinusoidal_pe

__version__ = "0.1.0"

#: Subpackages imported on first use (``helpers.plots``, ``from helpers import widgets``,
#: ``import helpers.exercises``): the notebooks' teaching code. plots needs matplotlib, widgets
#: ipywidgets (and with it IPython), the experiments tqdm: the ``teaching`` extra of pyproject.toml.
_ON_FIRST_USE = {
    "exercises": ".exercises",
    "experiment": ".experiment",
    "plots": ".plots",
    "widgets": ".widgets",
    "stretch": ".experiment.stretch",  # notebook 11's experiment, where it lived before the experiments met
}


def __getattr__(name):
    # Called only for a name the module does not hold yet. Importing a subpackage binds it as an
    # attribute of ``helpers``, so this runs once per name; ``python -m helpers.experiment`` also
    # runs cleanly because nothing imported it before.
    if name in _ON_FIRST_USE:
        module = _importlib.import_module(_ON_FIRST_USE[name], __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'helpers' has no attribute {name!r}")


#: Module paths the layout of issue 35 moved, with where each went: importing one raises an error
#: that names the new place instead of a bare "No module named ...".
_MOVED = {
    "helpers.attention": "helpers.self_attention (the function stays helpers.attention)",
    "helpers.rope_models": "helpers.model_catalog (its functions stay helpers.rope_models, helpers.model_rope, ...)",
    "helpers.stretch": "helpers.experiment.stretch (`from helpers import stretch` still works; "
    "`python -m helpers.experiment stretch` runs it)",
    "helpers._experiment_model": "helpers.experiment.model",
    "helpers._experiment_tasks": "helpers.experiment.tasks",
    "helpers._experiment_train": "helpers.experiment.train",
    "helpers._experiment_probes": "helpers.experiment.probes",
    "helpers._checks": "helpers._validate",
    "helpers._site": "tools/sitebuild, outside the package (`make html`, `make slides`)",
    "helpers._frames": "tools/sitebuild/frames.py, outside the package (`make html`, `make slides`)",
}


class _MovedFinder(_importlib_abc.MetaPathFinder):
    """Consulted last, so only for a module no other finder has: a moved one raises naming its new place."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in _MOVED:
            raise ModuleNotFoundError(f"{fullname} has moved: it is now {_MOVED[fullname]}", name=fullname)
        return None


# Once, even if helpers is reloaded (a reload makes a new class, so compare names, not types).
if not any(type(f).__qualname__ == "_MovedFinder" and type(f).__module__ == __name__ for f in _sys.meta_path):
    _sys.meta_path.append(_MovedFinder())


def __dir__():
    return sorted(set(globals()) | set(_ON_FIRST_USE))


__all__ = [
    # sinusoidal
    "frequencies",
    "sinusoidal_pe",
    "shift_matrix",
    "shift_distance",
    "nearest_collision",
    # rope
    "rope_frequencies",
    "rope_cos_sin",
    "rope_from_config",
    "rope_settings_from_config",
    "apply_rope",
    "apply_rope_qk",
    "rope_gather",
    "yarn_correction_range",
    "LAYOUTS",
    "SCALING_TYPES",
    # alibi
    "alibi_slopes",
    "alibi_bias",
    "alibi_key_bias",
    "alibi_decay_distance",
    # relative
    "relative_positions",
    "relative_position_bucket",
    "T5RelativeBias",
    "ShawRelativeBias",
    # kernels
    "position_kernel",
    "continuous_kernel",
    "toeplitz_projection",
    "toeplitz_spread",
    "block_rotation",
    "rotation_commuting_matrix",
    # self_attention
    "attention",
    "causal_mask",
    "score_terms",
    # model_catalog
    "ModelRope",
    "rope_models",
    "model_rope",
    "rope_layers",
    "ROPE_MODELS_PATH",
    "LAYER_KINDS",
    "PAIR_LAYOUTS",
    # device
    "default_device",
    "supports_float64",
    "ENV_DEVICE",
    # subpackages
    "checks",
    *_ON_FIRST_USE,
]
