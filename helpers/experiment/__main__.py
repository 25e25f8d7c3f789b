"""``python -m helpers.experiment [options]``: notebook 08's experiment (``extrapolation``);
``python -m helpers.experiment stretch [options]``: notebook 11's (``stretch``)."""

import sys

if sys.argv[1:2] == ["stretch"]:
    from .stretch import main

    raise SystemExit(main(sys.argv[2:]))
from .extrapolation import main

raise SystemExit(main())
