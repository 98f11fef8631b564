"""``python -m ffu_cvx``: the ``ffu-cvx`` command line.

Package layer: imports ``cli.cli`` only.
"""

import sys

from .cli.cli import main

if __name__ == "__main__":
    sys.exit(main())
