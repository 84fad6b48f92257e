"""GPT-style decoder-only language model (GPT-2 layout by default).

    x_0   = Dropout(E[tokens] + P[positions])                  embedding, embedding_dropout
    x_i   = TransformerBlock_i(x_{i-1}), causal, pre-norm      blocks[i]
    h     = LN(x_L)  or RMSNorm(x_L)      (pre-norm only)      final_norm
    logits = h Eᵀ  (tied)   or   h W (+ b)  (untied)           token_embedding reversed / head

`gpt(...)` (the builder, with presets) returns a `GPT`, a functional
`keras.Model` subclass whose parts are attributes (see `GPT`). The graph's
inputs are `token_ids` (and `padding_mask` with `with_padding_mask=True`), its
layers are named `embedding`, `embedding_dropout`, `decoder_block_{i}`,
`final_norm`, `lm_head` and the float32 output `logits` (B, T, V); the
checkpoint converters and `.keras` files rely on these names.
"""

import keras
from keras import ops

from keras_tfm.checks import check_cache_dtype
from keras_tfm.generation import text as generation_text
from keras_tfm.layers.output_head import OutputHead
from keras_tfm.models.base import TransformerModel, lm_loss_and_accuracy
from keras_tfm.models.options import ModelOptions, arguments
from keras_tfm.models.parts import block_caches, cache_positions, initializer, normal, zero_caches
from keras_tfm.models.presets import preset_options

#: The sizes a GPT needs (given, or from a preset).
GPT_SIZES = ("vocabulary_size", "max_length", "num_layers", "num_heads", "d_model")


@keras.saving.register_keras_serializable(package="keras_tfm")
class GPT(TransformerModel):
    """Decoder-only causal language model (GPT-2 by default).

        x_0 = Dropout(E[tokens] + P[positions]);  x_i = Block_i(x_{i-1});
        logits = LN(x_L) Eᵀ (tied) or LN(x_L) W (+ b)

    Args:
        vocabulary_size, max_length, num_layers, num_heads, d_model: sizes.
        d_ff: FFN inner width; defaults to 4·d_model.
        dropout: embedding, residual and FFN dropout.
        attention_dropout: dropout on attention weights (defaults to `dropout`).
        position: "learned" (GPT-2), "sinusoidal", "rope" (Llama), "alibi",
            "relative" or None.
        norm_first: pre-norm (GPT-2, adds `final_norm`) or post-norm.
        activation: FFN activation: "gelu_tanh" (GPT-2), "gelu", "relu",
            "silu", or the gated "swiglu" (Llama) / "geglu" (three FFN
            matrices, `d_ff` as given).
        layer_norm_epsilon: ε of every norm.
        norm: "layer" (LayerNorm, GPT-2) or "rms" (RMSNorm, Llama; float32
            statistics under mixed precision), in the blocks and `final_norm`.
        tie_embeddings: logits = h Eᵀ with the input embedding (GPT-2); else
            an `OutputHead` (`head`).
        use_bias: biases in every attention/FFN projection (False: Llama).
        attention_bias: the attention projections' biases, if not `use_bias`'s:
            True / False (all four) or "qkv" (Q, K, V only: Qwen2).
        sliding_window: None, or W: each position attends to the last W
            positions only, itself included (Mistral's `sliding_window`), in
            the full forward pass and in cached generation alike.
        lm_head_use_bias: bias of the untied head.
        key_dim: per-head size (defaults to d_model / num_heads).
        num_key_value_heads: key/value heads (grouped-query attention, must
            divide `num_heads`; 1 = multi-query); None = `num_heads`. The
            generation cache has this many heads.
        rope_max_wavelength: RoPE base θ with `position="rope"` (10000;
            500000 in Llama 3).
        attention_impl, attention_options: attention core implementation.
        with_padding_mask: add an int `padding_mask` input (1 = real token);
            the inputs are then a dict {"token_ids", "padding_mask"}.
        embeddings_initializer, kernel_initializer: defaults N(0, 0.02).
        dtype: dtype policy of every layer; logits are float32 regardless.
        name: model name.

    Attributes:
        embedding: the `TokenAndPositionEmbedding` (token table + absolute
            positions; `embedding.position` is None for rope/alibi/relative).
        token_embedding: its `TokenEmbedding` (table `embeddings` (V, d)).
        position_embedding: its position layer (`LearnedPositionalEmbedding`
            with `position_embeddings` (P, d), `PositionalEncoding`) or None.
        embedding_dropout: the `Dropout` after the embedding.
        blocks: list of the `TransformerBlock`s (`decoder_blocks` is the same).
        final_norm: the final `LayerNormalization` / `RMSNorm` (pre-norm) or None.
        head: the untied `OutputHead`, or None when tied.
        tie_embeddings: bool.
        vocabulary_size, max_length, num_layers, num_heads,
        num_key_value_heads, d_model, key_dim.
        cache_dtype: dtype of the decoding caches (None = compute dtype);
            a runtime setting, not saved.
        config: the constructor arguments (dict).
    """

    preset_family = "gpt"  # from_preset: gpt(name) for a built-in name
    checkpoint_task = "causal_lm"  # from_preset: from_pretrained task of a checkpoint

    def __init__(
        self,
        vocabulary_size: int,
        max_length: int,
        num_layers: int,
        num_heads: int,
        d_model: int,
        d_ff: int | None = None,
        dropout: float = 0.0,
        attention_dropout: float | None = None,
        position: str | None = "learned",
        norm_first: bool = True,
        activation: str = "gelu_tanh",
        layer_norm_epsilon: float = 1e-5,
        norm: str = "layer",
        tie_embeddings: bool = True,
        use_bias: bool = True,
        lm_head_use_bias: bool = False,
        key_dim: int | None = None,
        num_key_value_heads: int | None = None,
        rope_max_wavelength: float = 10000.0,
        attention_bias: bool | str | None = None,
        sliding_window: int | None = None,
        attention_impl: str = "auto",
        attention_options: dict | None = None,
        with_padding_mask: bool = False,
        embeddings_initializer=None,
        kernel_initializer=None,
        dtype=None,
        name: str = "gpt",
        **kwargs,
    ):
        o = ModelOptions("gpt", arguments(locals()), required=GPT_SIZES)
        sizes = o.layout_sizes(o.vocabulary_size)

        # === Layers ===
        embedding = o.embedding(
            o.vocabulary_size, initializer(embeddings_initializer, normal(0.02), "embedding"), "embedding"
        )
        embedding_dropout = keras.layers.Dropout(o.dropout, dtype=dtype, name="embedding_dropout")
        block_initializer = initializer(kernel_initializer, normal(0.02), "blocks")
        blocks = o.blocks("decoder_block", o.num_layers, causal=True, kernel_initializer=block_initializer)
        final_norm = o.make_norm("final_norm") if o.norm_first else None
        head = None
        if not o.tie_embeddings:
            head = OutputHead(
                o.vocabulary_size,
                use_bias=o.lm_head_use_bias,
                kernel_initializer=initializer(kernel_initializer, normal(0.02), "lm_head"),
                dtype=dtype,
                name="lm_head",
            )

        # === Functional graph ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        padding_mask = (
            keras.Input(shape=(None,), dtype="int32", name="padding_mask") if with_padding_mask else None
        )
        x = embedding_dropout(embedding(token_ids))
        for block in blocks:
            x = block(x) if padding_mask is None else block(x, padding_mask=padding_mask)
        x = x if final_norm is None else final_norm(x)
        logits = embedding(x, reverse=True) if head is None else head(x)
        logits = keras.layers.Identity(dtype="float32", name="logits")(logits)
        inputs = token_ids if padding_mask is None else {"token_ids": token_ids, "padding_mask": padding_mask}
        self._init_model(inputs, logits, name, o.config, layout_sizes=sizes, **kwargs)

        # === Parts ===
        self._set_parts(
            o.sizes(),
            embedding=embedding,
            token_embedding=embedding.token_embedding,
            position_embedding=embedding.position_embedding,
            embedding_dropout=embedding_dropout,
            blocks=blocks,
            final_norm=final_norm,
            head=head,
            tie_embeddings=o.tie_embeddings,
        )
        self._compile_defaults()  # `TransformerModel.compile`'s; a user's compile replaces them

    def _default_loss(self):
        """The causal LM loss: token cross-entropy from logits over every position (id 0 may be a real token), and `MaskedAccuracy`."""
        return lm_loss_and_accuracy(None)

    @property
    def decoder_blocks(self) -> list:
        """The `TransformerBlock`s (same list as `blocks`)."""
        return self.blocks

    # ------------------------------------------------------------ operations
    def embed(self, token_ids, positions=None):
        """Token + absolute position embedding (no dropout).

        Args:
            token_ids: int `(batch, T)`.
            positions: optional int `(batch, T)` position of every token
                (default 0..T-1); e.g. per-row offsets of left-padded prompts.

        Returns:
            `(batch, T, d_model)` in the compute dtype.
        """
        return self.embedding(token_ids, positions=positions)

    def compute_logits(self, hidden_states):
        """Float32 logits `(..., V)` of the last block's output (final norm, then
        the tied embedding or the head)."""
        h = hidden_states if self.final_norm is None else self.final_norm(hidden_states)
        logits = self.token_embedding(h, reverse=True) if self.head is None else self.head(h)
        return ops.cast(logits, "float32")

    def init_caches(self, batch_size: int, length: int, dtype: str | None = None) -> list:
        """Zero key/value caches: a flat list `[keys_0, values_0, keys_1, ...]`,
        two tensors per block in the layout of `MultiHeadSelfAttention.init_cache`
        (keys `(batch, num_key_value_heads, key_dim, length)`, values `(batch,
        num_key_value_heads, length, key_dim)`; a decoding step reads each once,
        in place).

        `dtype` (default: the `cache_dtype` attribute, else the blocks' compute
        dtype): e.g. "bfloat16" halves the bytes a decoding step reads; keys
        and values are rounded when written, attention runs in the compute dtype.
        """
        dtype = check_cache_dtype("dtype", dtype) or self.cache_dtype
        return zero_caches(self.blocks, batch_size, length, dtype)

    def call_with_cache(
        self, token_ids, caches, cache_index, positions=None, padding_mask=None, last_only=False
    ):
        """Runs `token_ids` at cache slots `cache_index .. cache_index + T - 1`.

        Args:
            token_ids: int32 `(batch, T)`.
            caches: list from `init_caches` (one per block).
            cache_index: int32 scalar, first slot written.
            positions: optional int32 `(batch, T)` true positions (absolute
                position embeddings); default `cache_index + 0..T-1`.
            padding_mask: optional bool `(batch, cache_slots)`, True = may attend.
            last_only: compute the logits of the last position only.

        Returns:
            `(logits, caches)`: float32 `(batch, T or 1, V)` and the updated caches.
        """
        x = self.embed(token_ids, cache_positions(token_ids, cache_index, positions))
        new_caches = []
        for block, cache in zip(self.blocks, block_caches(caches)):
            x, cache = block(
                x, padding_mask=padding_mask, cache=cache, cache_index=cache_index, training=False
            )
            new_caches.extend(cache)
        if last_only:
            x = x[:, -1:, :]
        return self.compute_logits(x), new_caches

    def decode_step(self, token_ids, positions, caches, cache_index, padding_mask, context=None):
        """The decoder protocol of `keras_tfm.generation` (`generator`): `call_with_cache` with
        the logits of the last position, `(batch, V)` float32, and the updated caches (a GPT has
        no `context`)."""
        logits, caches = self.call_with_cache(
            token_ids, caches, cache_index, positions=positions, padding_mask=padding_mask, last_only=True
        )
        return logits[:, 0, :], caches

    # ------------------------------------------------------------- text API
    def generate(self, inputs, max_new_tokens: int, completion_only: bool = False, **options):
        """Generates up to `max_new_tokens` tokens after each prompt: text or token ids.

        Token ids in (a 2-D int array or a list of id sequences): exactly
        `keras_tfm.generation.generate(model, inputs, max_new_tokens, **options)`
        (same options, same outputs). Text in (a str or a list of str): the
        prompts are tokenized with `model.tokenizer` (as its `tokenize` does),
        generated from with the same call, and each returned string is the
        prompt followed by its completion, `detokenize(prompt ids + new ids)`,
        as KerasHub's `generate` returns it; `completion_only=True` returns
        the completion alone (the `completions` of the exported `generate`
        signature for the same `eos_id`; an export stops on none unless
        given one). Detokenization follows the served signatures
        (`keras_tfm.generation.text`).

        Args:
            inputs: a str, a list of str, or token ids (2-D int array / list
                of id lists).
            max_new_tokens: new tokens per prompt, an int in [0,
                `generation.prompts.MAX_NEW_TOKENS`] (past `max_length` the
                window slides).
            completion_only: text only: return the completions without the
                prompts.
            **options: those of `keras_tfm.generation.generate`: `sampler`
                ("greedy" | "sample"), `temperature`, `top_k`, `top_p`,
                `seed`, `eos_id`, `pad_id`; ids only: `return_lengths`,
                `output_scores`, `prompt_lengths`. On text `eos_id`
                defaults to the tokenizer's `eos_id` (None, no stop id, when
                it has none); pass `eos_id=None` to generate past it.

        Returns:
            Text in: a str for a str, a list of str for a list. Ids in: what
            `keras_tfm.generation.generate` returns (int32 `(batch,
            max_new_tokens)` new ids, with lengths / scores when asked).

        Raises:
            ValueError: text without `model.tokenizer`, an empty batch, a
                text with no tokens, bad generation options (named).
            TypeError: a list mixing str and other items; ids-only options
                with text.
        """
        return generation_text.generate_text(
            self, inputs, max_new_tokens, completion_only=completion_only, **options
        )

    def beam_search(
        self, inputs, max_new_tokens: int, num_beams: int = 4, completion_only: bool = False, **options
    ):
        """Beam search from each prompt: text or token ids.

        Token ids in: exactly `keras_tfm.generation.beam_search(model, inputs,
        max_new_tokens, num_beams, **options)`. Text in (with
        `model.tokenizer`): the best beam of the same call as text, the prompt
        followed by its completion (`completion_only=True`: the completion,
        as the exported `beam_search` signature's `completions`).

        Args:
            inputs: a str, a list of str, or token ids.
            max_new_tokens: int >= 1.
            num_beams: beams per prompt, in [1, vocabulary size].
            completion_only: text only: the completions without the prompts.
            **options: `length_penalty` (α of ((5 + len) / 6)^α, default
                0.6; a HuggingFace checkpoint's model searches as HF `generate`,
                len^α, see `generation_defaults`), `length_penalty_style`,
                `early_stopping`, `eos_id` (text: default the tokenizer's
                `eos_id`), `pad_id`; ids only: `prompt_lengths`.

        Returns:
            Text in: a str (list of str) of the best beam. Ids in:
            `(sequences, scores, lengths)` as `generation.beam_search`.

        Raises:
            ValueError / TypeError: as `generate`.
        """
        return generation_text.beam_search_text(
            self, inputs, max_new_tokens, num_beams=num_beams, completion_only=completion_only, **options
        )


def gpt(preset: str | None = None, **options) -> GPT:
    """Builds a decoder-only causal language model.

    Args:
        preset: None or one of `list_presets("gpt")`: "tiny", the GPT-2
            sizes "gpt2_small", "gpt2_medium", the Llama layout
            "llama_tiny" (the lab model's size) and the published Llama
            sizes "tinyllama_1_1b", "llama2_7b", "llama3_8b" (pre-RMSNorm,
            SwiGLU, RoPE, grouped-query attention, no biases, untied head).
            A preset sets sizes and, for the Llama ones, the layout options;
            explicit arguments override it.
        **options: the arguments of `GPT` (sizes required unless a preset
            gives them; a size given as None is not given; `dropout`: the
            preset's or 0).

    Returns:
        A `GPT` (functional `keras.Model`) mapping int32 `token_ids` (B, T) to
        float32 `logits` (B, T, V).

    Raises:
        ValueError: unknown preset/position/activation/norm, missing or
            inconsistent sizes. TypeError: unknown keyword.
    """
    return GPT(**preset_options(GPT, "gpt", preset, options))
