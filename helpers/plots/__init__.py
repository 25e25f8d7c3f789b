"""Figures of the collection. Each drawing function returns a ``Drawing`` that can update itself."""

from . import bias as _bias
from . import clocks as _clocks
from . import equivariance as _equivariance
from . import experiment as _experiment
from . import kernel as _kernel
from . import models as _models
from . import rope as _rope
from . import scores as _scores
from . import stretch as _stretch
from ._drawing import DPI, FULL, Drawing, new_figure
from ._style import PAIR_COLORS, heatmap, pair_color
from .bias import *  # noqa: F401,F403
from .clocks import *  # noqa: F401,F403
from .equivariance import *  # noqa: F401,F403
from .experiment import *  # noqa: F401,F403
from .kernel import *  # noqa: F401,F403
from .models import *  # noqa: F401,F403
from .rope import *  # noqa: F401,F403
from .scores import *  # noqa: F401,F403
from .stretch import *  # noqa: F401,F403

__all__ = [
    "DPI",
    "FULL",
    "Drawing",
    "new_figure",
    "PAIR_COLORS",
    "heatmap",
    "pair_color",
    *_clocks.__all__,
    *_equivariance.__all__,
    *_kernel.__all__,
    *_scores.__all__,
    *_rope.__all__,
    *_bias.__all__,
    *_experiment.__all__,
    *_models.__all__,
    *_stretch.__all__,
]
