"""python -m roofkit.cli ... is the same as the roofkit command."""

import sys

from . import main

sys.exit(main())
