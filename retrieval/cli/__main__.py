"""`python -m retrieval.cli`, as the `hoptrace` script."""
import sys

from . import main

sys.exit(main())
