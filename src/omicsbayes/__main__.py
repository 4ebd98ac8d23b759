"""``python -m omicsbayes``: the ``omicsbayes`` command (:mod:`omicsbayes.cli`)."""

import sys

from .cli import main

sys.exit(main())
