"""``python -m roofkit ...`` is the same as the ``roofkit`` command."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
