"""`Tokenizer`: the API every keras_tfm tokenizer shares (a Keras layer of TF ops).

Special tokens come from the tokenizer's vocabulary. With `special_tokens=True`
(the default of the tokenizers built `from_corpus`) ids 0..6 are `[PAD] [UNK]
[CLS] [SEP] [MASK] [BOS] [EOS]` (`keras_tfm.tokenizers.special_tokens`) and ordinary
tokens start at id 7. A published vocabulary places them where it likes
(BERT: `[PAD]`=0, `[UNK]`=100, `[CLS]`=101, `[SEP]`=102, `[MASK]`=103): pass
`special_tokens={"pad": "[PAD]", "unk": "[UNK]", ...}` and each id is the
position of that token in the vocabulary. With `special_tokens=False` there is
none, and an out-of-vocabulary input is an error raised when the ops run.
The ids are public properties (`pad_id`, `unk_id`, `cls_id`, `sep_id`,
`mask_id`, `bos_id`, `eos_id`; None when absent) and so are the tokens added
around every sequence (`prefix_ids`, `suffix_ids`).
"""

import os
from typing import Any, Self

import keras
import tensorflow as tf

from keras_tfm.checks import check_bool, check_positive_int
from keras_tfm.tokenizers.batches import TextInput, id_column, string_batch
from keras_tfm.tokenizers.sentence_pairs import pack_sentence_pairs
from keras_tfm.tokenizers.special_tokens import (
    FIXED_SPECIAL_IDS,
    SPECIAL_TOKENS,
    SpecialTokensArg,
    check_special_tokens,
)
from keras_tfm.tokenizers.vocabulary_file import read_vocabulary_file, write_vocabulary_file


class Tokenizer(keras.layers.Layer):
    """Common API of keras_tfm tokenizers (not used directly).

    Args:
        special_tokens: True reserves ids 0..6 for `[PAD] [UNK] [CLS] [SEP]
            [MASK] [BOS] [EOS]`; a dict `{role: token}` (roles `pad`, `unk`,
            `cls`, `sep`, `mask`, `bos`, `eos`) names tokens of the vocabulary
            (a published one) as the special tokens; False: none.
        add_bos: prepend `[BOS]` to every sequence.
        add_eos: append `[EOS]` to every sequence.
        add_cls_sep: wrap every sequence as `[CLS] ... [SEP]` (BERT); not
            combinable with `add_bos` / `add_eos`.
        max_length: default for the `max_length` call argument.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: a scalar string or a `[batch]` string tensor (or Python
            str / list of str).
        max_length: optional int. When given (here or in the
            constructor) the output is a dense int32 tensor padded with
            `pad_id` (0 without a `[PAD]`) and truncated to this length (the
            added special tokens are kept; the text is cut); otherwise it is
            ragged.

    Returns:
        int32 ids: `[batch, None]` RaggedTensor (or `[batch, max_length]`
        dense), or a 1-D dense tensor for a scalar input.
    """

    def __init__(
        self,
        special_tokens: SpecialTokensArg = True,
        add_bos: bool = False,
        add_eos: bool = False,
        add_cls_sep: bool = False,
        max_length: int | None = None,
        **kwargs,
    ):
        kwargs.setdefault("trainable", False)
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        # Inputs are strings: do not let Keras convert or cast them.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True
        self.special_tokens = check_special_tokens(special_tokens)
        self.add_bos = check_bool("add_bos", add_bos)
        self.add_eos = check_bool("add_eos", add_eos)
        self.add_cls_sep = check_bool("add_cls_sep", add_cls_sep)
        if (add_bos or add_eos or add_cls_sep) and not special_tokens:
            raise ValueError("`add_bos`, `add_eos` and `add_cls_sep` need special tokens (`special_tokens`).")
        if add_cls_sep and (add_bos or add_eos):
            raise ValueError("`add_cls_sep` cannot be combined with `add_bos` or `add_eos`.")
        self.max_length = check_positive_int("max_length", max_length, allow_none=True)
        if not isinstance(self.special_tokens, dict):
            self._set_special_ids(FIXED_SPECIAL_IDS if self.special_tokens else {})

    def _set_special_ids(self, ids):
        """Records {role: id}; checks the roles that `add_*` need are present."""
        self._special_ids = dict(ids)
        needs = {"add_bos": ("bos",), "add_eos": ("eos",), "add_cls_sep": ("cls", "sep")}
        for flag, roles in needs.items():
            missing = [r for r in roles if r not in self._special_ids]
            if getattr(self, flag) and missing:
                raise ValueError(
                    f"`{flag}=True` needs special tokens {missing}, which this vocabulary lacks."
                )
        self._prefix = (
            (self._special_ids["cls"],)
            if self.add_cls_sep
            else ((self._special_ids["bos"],) if self.add_bos else ())
        )
        self._suffix = (
            (self._special_ids["sep"],)
            if self.add_cls_sep
            else ((self._special_ids["eos"],) if self.add_eos else ())
        )

    # ---- special tokens ----------------------------------------------------- #

    @property
    def pad_id(self) -> int | None:
        """Id of `[PAD]`, or None."""
        return self._special_ids.get("pad")

    @property
    def unk_id(self) -> int | None:
        """Id of `[UNK]` (out-of-vocabulary input), or None."""
        return self._special_ids.get("unk")

    @property
    def cls_id(self) -> int | None:
        """Id of `[CLS]`, or None."""
        return self._special_ids.get("cls")

    @property
    def sep_id(self) -> int | None:
        """Id of `[SEP]`, or None."""
        return self._special_ids.get("sep")

    @property
    def mask_id(self) -> int | None:
        """Id of `[MASK]`, or None."""
        return self._special_ids.get("mask")

    @property
    def bos_id(self) -> int | None:
        """Id of `[BOS]` (or a published vocabulary's start token), or None."""
        return self._special_ids.get("bos")

    @property
    def eos_id(self) -> int | None:
        """Id of `[EOS]` (or a published vocabulary's end token), or None."""
        return self._special_ids.get("eos")

    @property
    def special_token_ids(self) -> tuple[int, ...]:
        """Sorted tuple of the ids of all special tokens."""
        return tuple(sorted(set(self._special_ids.values())))

    @property
    def prefix_ids(self) -> tuple[int, ...]:
        """Ids `tokenize` puts before every sequence (`(cls_id,)`, `(bos_id,)` or `()`)."""
        return tuple(self._prefix)

    @property
    def suffix_ids(self) -> tuple[int, ...]:
        """Ids `tokenize` puts after every sequence (`(sep_id,)`, `(eos_id,)` or `()`)."""
        return tuple(self._suffix)

    def is_special(
        self, ids: tf.RaggedTensor | tf.types.experimental.TensorLike
    ) -> tf.Tensor | tf.RaggedTensor:
        """Boolean tensor, True where `ids` (dense or ragged) holds a special token."""
        special = tf.constant(self.special_token_ids or (-1,), tf.int32)

        def test(values):
            values = tf.cast(values, tf.int32)
            return tf.reduce_any(tf.equal(values[..., None], special), axis=-1)

        if isinstance(ids, tf.RaggedTensor):
            return tf.ragged.map_flat_values(test, ids)
        return test(tf.convert_to_tensor(ids))

    # ---- to implement ------------------------------------------------------ #

    def _encode(self, strings):
        """`[batch]` strings -> `[batch, None]` int32 RaggedTensor (no special tokens added)."""
        raise NotImplementedError

    def _decode(self, ids):
        """`[batch, None]` int32 RaggedTensor of valid ids -> `[batch]` strings."""
        raise NotImplementedError

    def get_vocabulary(self) -> list[str]:
        """Returns the list of all token strings; the index of each is its id."""
        raise NotImplementedError

    def _tokenizer_config(self):
        return {
            "special_tokens": self.special_tokens,
            "add_bos": self.add_bos,
            "add_eos": self.add_eos,
            "add_cls_sep": self.add_cls_sep,
            "max_length": self.max_length,
        }

    # ---- public API --------------------------------------------------------- #

    @property
    def vocabulary_size(self) -> int:
        """Number of ids, special tokens included."""
        return len(self.get_vocabulary())

    def id_to_token(self, token_id: int) -> str:
        """Returns the token string of id `token_id` (Python int)."""
        if isinstance(token_id, bool) or not isinstance(token_id, int):
            raise TypeError(f"`token_id` must be an int; received {token_id!r}.")
        vocabulary = self.get_vocabulary()
        if not 0 <= token_id < len(vocabulary):
            raise ValueError(f"`token_id` must be in [0, {len(vocabulary)}); received {token_id}.")
        return vocabulary[token_id]

    def token_to_id(self, token: str) -> int:
        """Returns the id of token string `token`; `[UNK]`'s id when unknown.

        Raises:
            KeyError: if the token is unknown and there is no `[UNK]`.
        """
        if not isinstance(token, str):
            raise TypeError(f"`token` must be a str; received {token!r}.")
        index = self._token_index()
        if token in index:
            return index[token]
        if self.unk_id is not None:
            return self.unk_id
        raise KeyError(f"`token` {token!r} is not in the vocabulary, and there is no [UNK].")

    def _token_index(self):
        index = self.__dict__.get("_token_index_cache")
        if index is None:
            # Stored around __setattr__ so neither Keras nor TF tracks this plain dict.
            index = {}
            for i, token in enumerate(self.get_vocabulary()):
                index.setdefault(token, i)
            self.__dict__["_token_index_cache"] = index
        return index

    def encode_text(self, batch: tf.Tensor) -> tf.RaggedTensor:
        """`[batch]` strings -> `[batch, None]` ragged int32 ids, without the tokens `tokenize` adds."""
        ids = self._encode(batch)
        if self.unk_id is None:
            ids = ids.with_flat_values(_assert_in_vocabulary(ids.flat_values))
        return ids

    def tokenize(self, inputs: TextInput, max_length: int | None = None) -> tf.Tensor | tf.RaggedTensor:
        """Strings to ids. See the class docstring for arguments and returns."""
        batch, scalar = string_batch(inputs)
        max_length = check_positive_int("max_length", max_length, allow_none=True)
        if max_length is None:
            max_length = self.max_length
        ids = self._add_special_tokens(self.encode_text(batch), max_length)
        if max_length is not None:
            ids = ids.to_tensor(default_value=self.pad_id or 0, shape=[None, max_length])
        return ids[0] if scalar else ids

    def _add_special_tokens(self, ids, max_length):
        reserved = len(self._prefix) + len(self._suffix)
        if max_length is not None:
            if max_length < reserved:
                raise ValueError(
                    f"`max_length` must be at least {reserved} to hold the added special tokens; "
                    f"received {max_length}."
                )
            ids = ids[:, : max_length - reserved]
        if not reserved:
            return ids
        parts = [ids]
        if self._prefix:
            parts.insert(0, id_column(self._prefix, ids))
        if self._suffix:
            parts.append(id_column(self._suffix, ids))
        return tf.concat(parts, axis=1)

    def tokenize_pairs(
        self, first: TextInput, second: TextInput | None = None, max_length: int | None = None
    ) -> dict[str, tf.Tensor]:
        """BERT model inputs for single sentences or sentence pairs.

        Builds `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]` with segment ids 0
        for `[CLS] a [SEP]` and 1 for `b [SEP]`, like HuggingFace's
        `tokenizer(first, second)`. Too long pairs are cut as HuggingFace's
        "longest_first" truncation does: when both halves exceed half the
        room each keeps half (the first gets the odd token less), otherwise
        the longer one is cut to what the shorter leaves.

        Args:
            first: scalar or `[batch]` strings.
            second: optional strings of the same shape.
            max_length: output length (the special tokens included);
                None pads to the longest row of the batch.

        Returns:
            A dict of dense int32 `[batch, length]` tensors (`[length]` for
            scalar inputs): `token_ids` (padded with `pad_id`, or 0 without a `[PAD]`),
            `segment_ids` and `padding_mask` (1 = real token).
        """
        return pack_sentence_pairs(self, first, second, max_length)

    def detokenize(self, ids: tf.RaggedTensor | tf.types.experimental.TensorLike) -> tf.Tensor:
        """Ids to strings, dropping special tokens except `[UNK]`.

        Args:
            ids: int tensor `[batch, length]` (dense; with special tokens on,
                the padding is dropped like every other special token) or
                `[batch, None]` RaggedTensor, or one sequence of rank 1.
                Without special tokens 0 is an ordinary id, so pass ragged ids
                to avoid decoding padding.

        Returns:
            `[batch]` string tensor (a scalar for a rank-1 input).
        """
        if isinstance(ids, tf.RaggedTensor):
            if not ids.dtype.is_integer:
                raise TypeError(f"`ids` must be an integer tensor; received dtype {ids.dtype.name}.")
        else:
            try:
                ids = tf.convert_to_tensor(ids)
            except (TypeError, ValueError) as error:
                raise TypeError(f"`ids` must be an integer tensor; received {ids!r}.") from error
            if not ids.dtype.is_integer:
                raise TypeError(f"`ids` must be an integer tensor; received dtype {ids.dtype.name}.")
        rank = ids.shape.rank
        if rank not in (1, 2):
            raise ValueError(f"`ids` must have rank 1 or 2; received shape {ids.shape}.")
        if rank == 1:
            ids = ids[None] if not isinstance(ids, tf.RaggedTensor) else ids
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(ids)
        ids = tf.cast(ids, tf.int32)
        ids = ids.with_flat_values(_assert_ids_in_range(ids.flat_values, self.vocabulary_size))
        dropped = tuple(i for i in self.special_token_ids if i != self.unk_id)
        if dropped:
            drop = tf.constant(dropped, tf.int32)
            keep = tf.ragged.map_flat_values(
                lambda v: ~tf.reduce_any(tf.equal(v[:, None], drop[None, :]), axis=-1), ids
            )
            ids = tf.ragged.boolean_mask(ids, keep)
        strings = self._decode(ids)
        return strings[0] if rank == 1 else strings

    def call(self, inputs: TextInput, max_length: int | None = None) -> tf.Tensor | tf.RaggedTensor:
        return self.tokenize(inputs, max_length=max_length)

    def compute_output_spec(self, inputs: Any, max_length: int | None = None) -> keras.KerasTensor:
        max_length = max_length or self.max_length
        batch_shape = tuple(inputs.shape)
        if max_length is not None:
            return keras.KerasTensor(batch_shape + (max_length,), dtype="int32")
        return keras.KerasTensor(batch_shape + (None,), dtype="int32", ragged=bool(batch_shape))

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(self._tokenizer_config())
        return config

    # ---- vocabulary files (format in `vocabulary_file`) -------------------- #

    def save_vocabulary(self, path: str | os.PathLike) -> None:
        """Writes the vocabulary and the tokenizer's options to a text file.

        The first line is a JSON header (`{"format": "keras_tfm.vocabulary",
        "class_name": ..., "config": {...}}`); then one token per line, in id
        order (special tokens included), each written as a JSON string so
        that newlines and spaces survive. The file is written to a temporary
        name in the same directory and moved into place with `os.replace`,
        so readers never see a partial file.

        Args:
            path: destination file path.
        """
        write_vocabulary_file(path, type(self).__name__, self._tokenizer_config(), self.get_vocabulary())

    @classmethod
    def from_vocabulary_file(cls, path: str | os.PathLike, **kwargs) -> Self:
        """Builds a tokenizer from a file written by `save_vocabulary`.

        Args:
            path: the vocabulary file.
            **kwargs: constructor arguments that override the saved options.

        Returns:
            A tokenizer of the saved class (which must be `cls` or a subclass).
        """
        class_name, config, tokens = read_vocabulary_file(path)
        tokenizer_cls = _subclass_named(cls, class_name)
        if tokenizer_cls is None:
            raise ValueError(f"`path` {path!r} holds a {class_name} vocabulary, not a {cls.__name__}.")
        config.update(kwargs)
        return tokenizer_cls._from_tokens(tokens, config, path)

    @classmethod
    def _from_tokens(cls, tokens, config, path):
        if config.get("special_tokens", True) is True:
            if tuple(tokens[: len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
                raise ValueError(f"`path` {path!r}: the first tokens must be {list(SPECIAL_TOKENS)}.")
            tokens = tokens[len(SPECIAL_TOKENS) :]
        return cls(vocabulary=tokens, **config)


def load_tokenizer(path: str | os.PathLike, **kwargs) -> Tokenizer:
    """Loads any keras_tfm tokenizer saved with `save_vocabulary`.

    Args:
        path: the vocabulary file.
        **kwargs: constructor arguments that override the saved options.

    Returns:
        The tokenizer, of the class recorded in the file.
    """
    return Tokenizer.from_vocabulary_file(path, **kwargs)


def _subclass_named(cls, name):
    pending = [cls]
    while pending:
        current = pending.pop()
        if current.__name__ == name:
            return current
        pending.extend(current.__subclasses__())
    return None


def _assert_in_vocabulary(flat_ids):
    ok = tf.reduce_all(flat_ids >= 0)
    check = tf.debugging.Assert(
        ok, ["Input contains a token that is not in the vocabulary, and there is no [UNK] to map it to."]
    )
    with tf.control_dependencies([check] if check is not None else []):
        return tf.identity(flat_ids)


def _assert_ids_in_range(flat_ids, vocabulary_size):
    ok = tf.reduce_all((flat_ids >= 0) & (flat_ids < vocabulary_size))
    check = tf.debugging.Assert(
        ok,
        [
            f"`ids` must be in [0, {vocabulary_size}); min and max received:",
            tf.reduce_min(flat_ids),
            tf.reduce_max(flat_ids),
        ],
    )
    with tf.control_dependencies([check] if check is not None else []):
        return tf.identity(flat_ids)
