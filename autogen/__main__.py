"""python -m hcq.autogen: see hcq.autogen.generator.cli."""
import sys

from hcq.autogen.generator.cli import main

sys.exit(main())
