"""helpers: the encoding and attention code that every notebook of the collection imports.

Pure functions on tensors; device and dtype follow the input or the ``device=`` / ``dtype=``
arguments. Each module's docstring gives its notation and conventions.

Note: ``helpers.attention`` is the function; the module is ``helpers.attention`` only through
``import helpers.attention as module`` style imports inside the package.
"""

# Import the modules first, under private names (the function ``attention`` shadows its module).
from . import alibi as _alibi
from . import attention as _attention
from . import checks, exercises, plots, widgets
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


def __getattr__(name):
    # ``helpers.experiment`` (the training code of notebook 08) is imported on first use, so that
    # ``python -m helpers.experiment`` runs it cleanly and ``import helpers`` stays light.
    if name == "experiment":
        import importlib

        return importlib.import_module(".experiment", __name__)
    raise AttributeError(f"module 'helpers' has no attribute {name!r}")


__all__ = [
    "checks",
    "exercises",
    "experiment",  # noqa: F405  (imported on first use by __getattr__ above)
    "plots",
    "widgets",
    *_alibi.__all__,
    *_attention.__all__,
    *_device_module.__all__,
    *_kernels.__all__,
    *_relative.__all__,
    *_rope.__all__,
    *_rope_models.__all__,
    *_sinusoidal.__all__,
]
