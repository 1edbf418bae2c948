"""python -m roofkit.cli ... is the same as the roofkit command."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
