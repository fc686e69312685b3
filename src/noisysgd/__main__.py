"""``python -m noisysgd``: the same as the ``noisysgd`` command."""

import sys

from .cli import console

sys.exit(console())
