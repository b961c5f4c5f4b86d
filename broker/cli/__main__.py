"""``python -m broker.cli``: the same as the ``raftwood`` console script."""
import sys

from .main import main

sys.exit(main())
