"""``python -m relay.cli``: the ``relay`` command line."""

import sys

from relay.cli import main

sys.exit(main())
