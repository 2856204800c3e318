"""``python -m hpcbridge`` is the ``hpcbridge`` command."""

import sys

from .cli import main

sys.exit(main())
