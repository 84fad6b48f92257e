"""Special tokens shared by every keras_tfm tokenizer and pipeline.

Tokenizers built with `special_tokens=True` reserve the first
`NUM_SPECIAL_TOKENS` ids for these tokens, always in this order:

    id  token    use
    0   [PAD]    padding (batches are padded with 0)
    1   [UNK]    out-of-vocabulary input
    2   [CLS]    start of a BERT-style input
    3   [SEP]    end of a BERT-style segment
    4   [MASK]   masked-language-model corruption
    5   [BOS]    start of a decoder sequence
    6   [EOS]    end of a sequence

Every other id (`>= NUM_SPECIAL_TOKENS`) is an ordinary token.

These fixed ids hold for the tokenizers built `from_corpus` (and for any
tokenizer made with `special_tokens=True`). A published vocabulary puts its
special tokens elsewhere (BERT: `[PAD]`=0, `[UNK]`=100, `[CLS]`=101,
`[SEP]`=102, `[MASK]`=103; GPT-2: `<|endoftext|>`=50256), so code that may
receive a `from_pretrained` tokenizer reads the ids from the tokenizer itself:
`tokenizer.pad_id`, `unk_id`, `cls_id`, `sep_id`, `mask_id`, `bos_id`,
`eos_id` (None when absent), `special_token_ids`, `is_special(ids)`,
`prefix_ids` / `suffix_ids` (what `tokenize` adds around every sequence).
"""

import tensorflow as tf

PAD = 0
UNK = 1
CLS = 2
SEP = 3
MASK = 4
BOS = 5
EOS = 6

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[BOS]", "[EOS]")
NUM_SPECIAL_TOKENS = len(SPECIAL_TOKENS)


class SpecialTokens:
    """The fixed special-token table as a small helper.

    All members are class attributes, so the class is used without an
    instance: `SpecialTokens.MASK`, `SpecialTokens.token(4)`,
    `SpecialTokens.is_special(ids)`.
    """

    PAD = PAD
    UNK = UNK
    CLS = CLS
    SEP = SEP
    MASK = MASK
    BOS = BOS
    EOS = EOS
    TOKENS = SPECIAL_TOKENS
    COUNT = NUM_SPECIAL_TOKENS

    @staticmethod
    def token(token_id: int) -> str:
        """Returns the string of special id `token_id` (e.g. `"[MASK]"` for 4).

        Args:
            token_id: int in `[0, NUM_SPECIAL_TOKENS)`.

        Returns:
            The token string.
        """
        if isinstance(token_id, bool) or not isinstance(token_id, int):
            raise TypeError(f"`token_id` must be an int; received {token_id!r}.")
        if not 0 <= token_id < NUM_SPECIAL_TOKENS:
            raise ValueError(f"`token_id` must be in [0, {NUM_SPECIAL_TOKENS}); received {token_id}.")
        return SPECIAL_TOKENS[token_id]

    @staticmethod
    def id(token: str) -> int:
        """Returns the id of special token string `token` (e.g. 4 for `"[MASK]"`).

        Args:
            token: one of `SPECIAL_TOKENS`.

        Returns:
            The int id.
        """
        if token not in SPECIAL_TOKENS:
            raise ValueError(f"`token` must be one of {list(SPECIAL_TOKENS)}; received {token!r}.")
        return SPECIAL_TOKENS.index(token)

    @staticmethod
    def is_special(ids: tf.RaggedTensor | tf.types.experimental.TensorLike) -> tf.Tensor | tf.RaggedTensor:
        """Boolean tensor, True where `ids` holds a special token (pad included).

        Args:
            ids: integer tensor (dense or ragged) of token ids.

        Returns:
            A bool tensor of the same shape.
        """
        if isinstance(ids, tf.RaggedTensor):
            return tf.ragged.map_flat_values(lambda v: v < NUM_SPECIAL_TOKENS, ids)
        ids = tf.convert_to_tensor(ids)
        return ids < tf.cast(NUM_SPECIAL_TOKENS, ids.dtype)


# Role names of the special tokens, in the order of their fixed ids 0..6.
SPECIAL_TOKEN_ROLES = ("pad", "unk", "cls", "sep", "mask", "bos", "eos")
FIXED_SPECIAL_IDS = {role: i for i, role in enumerate(SPECIAL_TOKEN_ROLES)}

#: `special_tokens` argument: True (fixed ids 0..6), False (none) or {role: token of the vocabulary}.
SpecialTokensArg = bool | dict[str, str]


def check_special_tokens(special_tokens: SpecialTokensArg) -> SpecialTokensArg:
    """`special_tokens` is a bool or a {role: token string} dict; returns it (dict copied)."""
    if isinstance(special_tokens, bool):
        return special_tokens
    if not isinstance(special_tokens, dict):
        raise TypeError(
            "`special_tokens` must be a bool or a dict mapping roles "
            f"{list(SPECIAL_TOKEN_ROLES)} to token strings; received {special_tokens!r}."
        )
    unknown = sorted(set(special_tokens) - set(SPECIAL_TOKEN_ROLES))
    if unknown:
        raise ValueError(
            f"`special_tokens` has unknown roles {unknown}; expected some of {list(SPECIAL_TOKEN_ROLES)}."
        )
    for role, token in special_tokens.items():
        if not isinstance(token, str) or not token:
            raise ValueError(f"`special_tokens[{role!r}]` must be a non-empty str; received {token!r}.")
    return dict(special_tokens)
