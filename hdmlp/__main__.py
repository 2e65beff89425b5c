import sys

from hdmlp.cli import main

sys.exit(main())
