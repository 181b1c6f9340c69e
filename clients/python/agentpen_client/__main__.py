"""python -m agentpen_client: the command line (agentpen-client)."""

import sys

from .cli import main

sys.exit(main())
