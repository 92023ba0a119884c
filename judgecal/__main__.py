import sys

from judgecal.cli import main

sys.exit(main())
