"""``python -m logzbench.cli``."""

import sys

from . import main

sys.exit(main())
