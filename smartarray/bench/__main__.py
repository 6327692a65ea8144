"""``python -m smartarray.bench``: see :mod:`smartarray.bench.cli`."""

import sys

from .cli import main

sys.exit(main())
