import sys

from cronbox.cli import main

sys.exit(main())
