"""`python -m keras_tfm_console ARGS` = the `keras-tfm` command."""

import sys

from keras_tfm_console.launcher import main

sys.exit(main())
