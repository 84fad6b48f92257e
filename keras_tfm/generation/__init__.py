"""Text generation: samplers, the cached XLA decoding loop, beam search and generators."""

from keras_tfm.backend import require_tensorflow as _require_tensorflow

_require_tensorflow("keras_tfm.generation", backend_too=True)

# Cached decoding (KV caches, one XLA while loop, beam search).
from keras_tfm.generation.api import (
    beam_search,  # noqa: F401,E402
    generate,  # noqa: F401,E402
    get_generator,  # noqa: F401,E402
)
from keras_tfm.generation.beam import beam_search_loop  # noqa: F401,E402
from keras_tfm.generation.causal_lm import (
    CausalLMAdapter,  # noqa: F401,E402
    CausalLMGenerator,  # noqa: F401,E402
)
from keras_tfm.generation.decoding import (
    DecoderAdapter,  # noqa: F401,E402
    FunctionAdapter,  # noqa: F401,E402
    decode,  # noqa: F401,E402
)
from keras_tfm.generation.samplers import (
    MASK_VALUE,  # noqa: F401
    check_sampling_args,  # noqa: F401
    filter_top_k,  # noqa: F401
    filter_top_p,  # noqa: F401
    greedy,  # noqa: F401
    sample,  # noqa: F401
    split_seed,  # noqa: F401
)
from keras_tfm.generation.seq2seq_generator import (
    Seq2SeqAdapter,  # noqa: F401,E402
    Seq2SeqGenerator,  # noqa: F401,E402
)
