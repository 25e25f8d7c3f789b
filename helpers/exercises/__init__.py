"""The exercises of the notebooks, checked by name: ``helpers.exercises.check("06.4", answer)``.

The machinery is in ``_core``; each notebook's exercises are registered in ``_nbNN`` (imported
here, so that every name is known once ``helpers`` is imported). The expected answers are
computed there from each exercise's parameters and never printed.
"""

from . import _nb01, _nb02, _nb03, _nb04, _nb05, _nb06, _nb07, _nb08, _nb09, _nb10, _nb11  # noqa: F401  (they register)
from ._core import Exercise, Mistake, Verdict, check, get, register, registered, verdict

__all__ = ["Exercise", "Mistake", "Verdict", "check", "get", "register", "registered", "verdict"]
