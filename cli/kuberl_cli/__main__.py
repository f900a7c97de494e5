import sys

from kuberl_cli.main import main

sys.exit(main())
