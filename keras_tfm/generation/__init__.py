"""Text generation: samplers, the cached XLA decoding loop, beam search and generators."""

from keras_tfm.generation.samplers import MASK_VALUE  # noqa: F401
from keras_tfm.generation.samplers import check_sampling_args  # noqa: F401
from keras_tfm.generation.samplers import filter_top_k  # noqa: F401
from keras_tfm.generation.samplers import filter_top_p  # noqa: F401
from keras_tfm.generation.samplers import greedy  # noqa: F401
from keras_tfm.generation.samplers import sample  # noqa: F401
from keras_tfm.generation.samplers import split_seed  # noqa: F401

# Cached decoding (KV caches, one XLA while loop, beam search).
from keras_tfm.generation.api import beam_search  # noqa: F401,E402
from keras_tfm.generation.api import generate  # noqa: F401,E402
from keras_tfm.generation.api import get_generator  # noqa: F401,E402
from keras_tfm.generation.beam import beam_search_loop  # noqa: F401,E402
from keras_tfm.generation.causal_lm import CausalLMAdapter  # noqa: F401,E402
from keras_tfm.generation.causal_lm import CausalLMGenerator  # noqa: F401,E402
from keras_tfm.generation.decoding import DecoderAdapter  # noqa: F401,E402
from keras_tfm.generation.decoding import FunctionAdapter  # noqa: F401,E402
from keras_tfm.generation.decoding import decode  # noqa: F401,E402
from keras_tfm.generation.seq2seq_generator import Seq2SeqAdapter  # noqa: F401,E402
from keras_tfm.generation.seq2seq_generator import Seq2SeqGenerator  # noqa: F401,E402
