"""``python -m sitebuild`` (with ``tools`` on the path, as the Makefile runs it): see the package."""

from . import main

main()
