import sys

from tb_llmdiag.cli import main

sys.exit(main())
