"""`python -m hcq.smi`: see hcq.smi.cli."""
from hcq.smi.cli import main

raise SystemExit(main())
