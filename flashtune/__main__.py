import sys

from flashtune.cli import main

sys.exit(main())
