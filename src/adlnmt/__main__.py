"""``python -m adlnmt`` (and ``torchrun -m adlnmt train ...``)."""

import sys

from adlnmt.cli import main

sys.exit(main())
