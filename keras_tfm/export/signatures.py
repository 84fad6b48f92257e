"""Serving signatures of exported models: tokenization, validation and
generation inside the graph.

Every endpoint is built from three parts:

1. *request validation* with `tf.debugging.Assert` (a failed check raises
   `InvalidArgumentError` whose message names the input), placed in the plain
   graph, outside every XLA-compiled function (asserts inside
   `jit_compile=True` are dropped). The compute depends on the checks through
   control dependencies, so a bad request never starts a decoding loop;
2. *tokenization / detokenization* with the keras_tfm tokenizer's TF ops;
3. the *compiled decoding loop* (`keras_tfm.generation.decoding.decode` /
   `beam.beam_search_loop`), one XLA function per static configuration:

   * GPT: one loop for the requests that fit the model's context, of any
     prompt width (the prompts are left-padded to the in-process generator's
     width, `prompt_bucket(longest prompt)`) and one cache length, enough
     for the longest such request; XLA compiles it for each (batch size,
     prompt width) on its first request, as in process. Its tokens are those
     of the in-process call: a longer cache only adds masked slots. A request
     whose prompt + `max_new_tokens` passes the model's maximum length runs
     the sliding-window loop (`keras_tfm.generation.sliding_window`),
     compiled for the widest prompt width, as in process. The request picks
     its loop in the graph (`tf.cond`).
   * seq2seq: `num_beams` is a request input, any width in [1, max_beams]
     (fixed at export): width 1 runs the greedy loop, a wider request the
     beam search compiled for `max_beams` beams with the spare beams kept
     dead (exactly a search of the requested width); one cache length for
     every `max_new_tokens`. Source lengths stay dynamic (XLA compiles each
     padded length once, as in process).

Only the signatures asked for are exported (`export_for_serving(signatures=)`;
a GPT's beam search on request): each decoding loop is traced at export,
loaded and compiled at the first request.

Sampling parameters are request tensors: temperature 0 selects greedy
decoding inside the compiled loop (a `tf.cond`, no recompilation), otherwise
stateless temperature / top-k / top-p sampling from `seed` (the same seed
gives the same tokens, as `generate(..., seed=int)` in process).

Modules: `common` (request validation, tokenization, buckets), `gpt_serving`
(`GPTServing`), `seq2seq_serving` (`Seq2SeqServing`), `bert_serving`
(`BertClassifierServing`, `BertMaskedLMServing`).
"""

from keras_tfm.export.bert_serving import BertClassifierServing, BertMaskedLMServing, SentenceEncoderServing
from keras_tfm.export.gpt_serving import GPTServing
from keras_tfm.export.seq2seq_serving import Seq2SeqServing

__all__ = [
    "BertClassifierServing",
    "BertMaskedLMServing",
    "GPTServing",
    "Seq2SeqServing",
    "SentenceEncoderServing",
]
