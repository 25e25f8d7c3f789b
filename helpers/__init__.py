"""helpers: the encoding and attention code that every notebook of the collection imports.

Pure functions on tensors; device and dtype follow the input or the ``device=`` / ``dtype=``
arguments. Each module's docstring gives its notation and conventions.

``import helpers`` loads the maths only (torch, numpy; SciPy when ``continuous_kernel`` first needs
its cosine integral). The teaching stack is imported on
first use: ``helpers.plots`` (matplotlib), ``helpers.widgets`` (ipywidgets), ``helpers.exercises``
and ``helpers.experiment`` (the training code of notebook 08), so that an engineer who uses the
encodings pays neither the seconds nor the packages of the figures and sliders (the distribution's
``teaching`` extra installs them; ``tests/test_packaging.py`` checks that they stay unloaded).

Note: ``helpers.attention`` is the function; the module is ``helpers.attention`` only through
``import helpers.attention as module`` style imports inside the package.
"""

# Import the modules first, under private names (the function ``attention`` shadows its module).
from . import alibi as _alibi
from . import attention as _attention
from . import checks
from . import device as _device_module
from . import kernels as _kernels
from . import relative as _relative
from . import rope as _rope
from . import rope_models as _rope_models
from . import sinusoidal as _sinusoidal
from .alibi import *  # noqa: F401,F403,E402
from .attention import *  # noqa: F401,F403,E402
from .device import *  # noqa: F401,F403,E402
from .kernels import *  # noqa: F401,F403,E402
from .relative import *  # noqa: F401,F403,E402
from .rope import *  # noqa: F401,F403,E402
from .rope_models import *  # noqa: F401,F403,E402
from .sinusoidal import *  # noqa: F401,F403,E402

__version__ = "0.1.0"

#: Submodules imported on first use (``helpers.plots``, ``from helpers import widgets``,
#: ``import helpers.exercises``): the notebooks' teaching code. plots needs matplotlib, widgets
#: ipywidgets (and with it IPython), the experiment tqdm: the ``teaching`` extra of pyproject.toml.
_ON_FIRST_USE = ("exercises", "experiment", "plots", "widgets")


def __getattr__(name):
    # Called only for a name the module does not hold yet. Importing the submodule binds it as an
    # attribute of ``helpers``, so this runs once per name; ``python -m helpers.experiment`` also
    # runs cleanly because nothing imported it before.
    if name in _ON_FIRST_USE:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'helpers' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_ON_FIRST_USE))


__all__ = [
    "checks",
    *_ON_FIRST_USE,
    *_alibi.__all__,
    *_attention.__all__,
    *_device_module.__all__,
    *_kernels.__all__,
    *_relative.__all__,
    *_rope.__all__,
    *_rope_models.__all__,
    *_sinusoidal.__all__,
]
