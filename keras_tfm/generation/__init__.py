"""Text generation: samplers (and, later, decoding loops)."""

from keras_tfm.generation.samplers import MASK_VALUE  # noqa: F401
from keras_tfm.generation.samplers import check_sampling_args  # noqa: F401
from keras_tfm.generation.samplers import filter_top_k  # noqa: F401
from keras_tfm.generation.samplers import filter_top_p  # noqa: F401
from keras_tfm.generation.samplers import greedy  # noqa: F401
from keras_tfm.generation.samplers import sample  # noqa: F401
from keras_tfm.generation.samplers import split_seed  # noqa: F401
