"""``python -m hpcbridge.cli`` is the ``hpcbridge`` command."""

import sys

from . import main

sys.exit(main())
