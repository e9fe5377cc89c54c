import sys

from workers.cli import main

sys.exit(main())
