"""The special ids and generation defaults of a seq2seq checkpoint (T5, BART, Marian).

HuggingFace keeps them in `config.json` and `generation_config.json` (which wins where both
name a field, as `GenerationConfig.from_pretrained` reads it). keras_tfm keeps them on the
model: `pad_id` (a constructor option) and `generation_config` (the keys of
`keras_tfm.generation.constraints.GENERATION_CONFIG_KEYS`):

    pad_token_id                  pad_id
    decoder_start_token_id        generation_config["decoder_start_id"]
    eos_token_id                  generation_config["eos_id"]      (a list: its first id)
    forced_bos_token_id           generation_config["forced_bos_id"]
    forced_eos_token_id           generation_config["forced_eos_id"]
    bad_words_ids  [[id], ...]    generation_config["suppressed_ids"] (single-token entries)

Search settings of the hub files (`num_beams`, `max_length`, `length_penalty`,
`no_repeat_ngram_size`, ...) are not model options: pass them to the call.
"""

import os
import warnings

from keras_tfm.checkpoints.files import CheckpointError, read_json

GENERATION_FILE = "generation_config.json"

#: HuggingFace field → keras_tfm `generation_config` key (single token ids).
ID_FIELDS = {
    "decoder_start_token_id": "decoder_start_id",
    "eos_token_id": "eos_id",
    "forced_bos_token_id": "forced_bos_id",
    "forced_eos_token_id": "forced_eos_id",
}


def _token_id(value, where, field):
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        if len(value) > 1:
            warnings.warn(
                f"{where}: field {field!r} = {value}: keras_tfm stops on one id; using {value[0]}.",
                stacklevel=4,
            )
        value = value[0]
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise CheckpointError(f"{where}: field {field!r} = {value!r}: expected a token id (an int >= 0).")
    return value


def _suppressed_ids(value, where):
    """The single-token entries of `bad_words_ids`; longer ones are not applied (a warning)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, list) for v in value):
        raise CheckpointError(f"{where}: field 'bad_words_ids' = {value!r}: expected a list of id lists.")
    single = [v[0] for v in value if len(v) == 1]
    if len(single) != len(value):
        warnings.warn(
            f"{where}: field 'bad_words_ids' holds token sequences longer than one; keras_tfm suppresses "
            f"single tokens only ({single}) and does not apply the others.",
            stacklevel=4,
        )
    return [_token_id(v, where, "bad_words_ids") for v in single]


def read_special_ids(config, directory, config_path):
    """`(pad_id, generation_config)` of a checkpoint: config.json's fields with those of
    generation_config.json over them (module docstring)."""
    generation = read_json(directory, GENERATION_FILE, required=False) or {}
    merged = {**config, **generation}
    where = os.path.join(directory, GENERATION_FILE) if generation else config_path
    defaults = {key: _token_id(merged.get(field), where, field) for field, key in ID_FIELDS.items()}
    defaults["suppressed_ids"] = _suppressed_ids(merged.get("bad_words_ids"), where)
    return _token_id(merged.get("pad_token_id"), where, "pad_token_id"), defaults


def hf_special_ids(model):
    """The HuggingFace fields of a model's `pad_id` and `generation_config` (for config.json and
    generation_config.json)."""
    defaults = model.generation_config or {}
    fields = {"pad_token_id": model.pad_id}
    fields.update({field: defaults.get(key) for field, key in ID_FIELDS.items()})
    if defaults.get("suppressed_ids"):
        fields["bad_words_ids"] = [[int(i)] for i in defaults["suppressed_ids"]]
    return fields


__all__ = ["GENERATION_FILE", "hf_special_ids", "read_special_ids"]
