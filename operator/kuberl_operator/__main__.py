import sys

from kuberl_operator.main import main

sys.exit(main())
