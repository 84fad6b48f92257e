"""The one shared layer-test helper (in the spirit of KerasHub's `run_layer_test`).

`run_layer_test(layer_cls, init_kwargs, input_data, ...)` checks, for one layer
configuration:

* output shape(s) and the number of trainable / non-trainable weights;
* `get_config` → `from_config` round trip (the rebuilt config equals the original);
* the layer in the functional API (`keras.Input` → layer → `keras.Model`);
* `.keras` save → load of that small model, with identical outputs;
* float32 / mixed_float16 / mixed_bfloat16 dtype policies: no NaN/Inf and outputs
  close to float32 (weights copied from the float32 layer);
* a run under `tf.function(jit_compile=True)` equal to the eager float32 run.

`input_data` is one array or a tuple of arrays passed positionally; array values
in `call_kwargs` (masks, caches) also become model inputs in the functional and
saving checks, other values are passed as constants. Layers whose inputs are not
tensors (e.g. `AlibiBias(query_length, key_length)`) pass `tensor_inputs=False`,
which skips the functional and saving checks (they have no symbolic input).
"""

import os
import tempfile

import keras
import numpy as np
import tensorflow as tf

MIXED_TOLERANCES = {"mixed_float16": 1e-2, "mixed_bfloat16": 5e-2}


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _flatten(outputs):
    """Output tensors as a list of float64 numpy arrays (dicts sorted by key)."""
    flat = keras.tree.flatten(outputs)
    return [
        np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(t, "float32")), dtype=np.float64) for t in flat
    ]


def _is_array(x):
    return isinstance(x, (np.ndarray, tf.Tensor))


def _symbolic(x, name):
    x = np.asarray(x)
    return keras.Input(shape=x.shape[1:], batch_size=x.shape[0], dtype=str(x.dtype), name=name)


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_data,
    expected_output_shape,
    expected_num_trainable_weights,
    expected_num_non_trainable_weights=0,
    call_kwargs=None,
    tensor_inputs=True,
    run_mixed_precision=True,
    run_jit=True,
    run_saving=True,
    mixed_tolerances=None,
    float32_outputs=False,
):
    """Runs the standard battery of checks on `layer_cls(**init_kwargs)`.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments (without `dtype`).
        input_data: array or tuple of arrays/values passed positionally.
        expected_output_shape: a shape tuple, or a list of shape tuples when the
            layer returns several tensors (flattened in `keras.tree` order).
        expected_num_trainable_weights: number of trainable weights once built.
        expected_num_non_trainable_weights: number of non-trainable weights.
        call_kwargs: extra call arguments.
        tensor_inputs: False for layers called with Python ints.
        run_mixed_precision, run_jit, run_saving: switch checks off.
        mixed_tolerances: overrides of `MIXED_TOLERANCES` per policy.
        float32_outputs: the layer returns float32 under every policy (logits,
            probabilities, position biases); otherwise its first output must
            be in the policy's compute dtype.

    Returns:
        The float32 layer and its flattened float64 numpy outputs.
    """
    call_kwargs = dict(call_kwargs or {})
    args = _as_tuple(input_data)
    tolerances = dict(MIXED_TOLERANCES, **(mixed_tolerances or {}))

    # -- eager float32 call: shapes and weights.
    layer = layer_cls(**init_kwargs)
    outputs = layer(*args, **call_kwargs)
    ref = _flatten(outputs)
    shapes = expected_output_shape if isinstance(expected_output_shape, list) else [expected_output_shape]
    assert [r.shape for r in ref] == [tuple(s) for s in shapes], (
        f"output shapes {[r.shape for r in ref]} != expected {shapes}"
    )
    for r in ref:
        assert np.all(np.isfinite(r)), "float32 output has NaN/Inf"
    assert len(layer.trainable_weights) == expected_num_trainable_weights, (
        f"{len(layer.trainable_weights)} trainable weights, expected {expected_num_trainable_weights}"
    )
    assert len(layer.non_trainable_weights) == expected_num_non_trainable_weights
    weights = layer.get_weights()

    # -- config round trip.
    config = layer.get_config()
    revived = layer_cls.from_config(config)
    assert revived.get_config() == config
    # The registered name makes it deserializable from the generic config too.
    generic = keras.layers.deserialize(keras.layers.serialize(layer))
    assert type(generic) is layer_cls and generic.get_config() == config

    # -- functional API and `.keras` saving.
    if tensor_inputs:
        sym_args = tuple(_symbolic(a, f"arg{i}") if _is_array(a) else a for i, a in enumerate(args))
        sym_kwargs = {k: _symbolic(v, k) if _is_array(v) else v for k, v in call_kwargs.items()}
        model_inputs = [a for a in sym_args if isinstance(a, keras.KerasTensor)]
        model_inputs += [v for v in sym_kwargs.values() if isinstance(v, keras.KerasTensor)]
        feed = [a for a in args if _is_array(a)] + [v for v in call_kwargs.values() if _is_array(v)]
        f_layer = layer_cls.from_config(config)
        sym_out = f_layer(*sym_args, **sym_kwargs)
        assert [tuple(t.shape) for t in keras.tree.flatten(sym_out)] == [tuple(s) for s in shapes], (
            "symbolic output shape differs from the eager one"
        )
        model = keras.Model(model_inputs, sym_out)
        f_layer.set_weights(weights)
        model_out = _flatten(model(feed))
        for got, want in zip(model_out, ref):
            np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
        if run_saving:
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "model.keras")
                model.save(path)
                loaded = keras.saving.load_model(path)
            loaded_out = _flatten(loaded(feed))
            assert len(loaded_out) == len(model_out)
            for got, want in zip(loaded_out, model_out):
                np.testing.assert_array_equal(got, want)
            loaded_layer = [lyr for lyr in loaded.layers if isinstance(lyr, layer_cls)]
            assert len(loaded_layer) == 1 and loaded_layer[0].get_config() == f_layer.get_config()

    # -- mixed precision.
    if run_mixed_precision:
        for policy, tol in tolerances.items():
            mp_layer = layer_cls(**init_kwargs, dtype=policy)
            mp_layer(*args, **call_kwargs)  # build
            mp_layer.set_weights(weights)
            assert mp_layer.compute_dtype == policy.split("_")[1]
            assert all(w.dtype == "float32" for w in mp_layer.weights), "variables must stay float32"
            raw = keras.tree.flatten(mp_layer(*args, **call_kwargs))
            if float32_outputs:
                assert all(keras.backend.standardize_dtype(t.dtype) == "float32" for t in raw), policy
            else:
                assert keras.backend.standardize_dtype(raw[0].dtype) == mp_layer.compute_dtype, policy
            mp_out = _flatten(raw)
            assert len(mp_out) == len(ref)
            for got, want in zip(mp_out, ref):
                assert np.all(np.isfinite(got)), f"{policy} output has NaN/Inf"
                np.testing.assert_allclose(got, want, atol=tol, rtol=tol, err_msg=policy)

    # -- XLA.
    if run_jit:
        tensor_pos = [i for i, a in enumerate(args) if _is_array(a)]
        tensor_kw = [k for k, v in call_kwargs.items() if _is_array(v)]

        @tf.function(jit_compile=True)
        def jitted(tensors, kw_tensors):
            full = list(args)
            for i, t in zip(tensor_pos, tensors):
                full[i] = t
            kwargs = dict(call_kwargs, **dict(zip(tensor_kw, kw_tensors)))
            return layer(*full, **kwargs)

        jit_out = _flatten(
            jitted(
                [tf.convert_to_tensor(args[i]) for i in tensor_pos],
                [tf.convert_to_tensor(call_kwargs[k]) for k in tensor_kw],
            )
        )
        for got, want in zip(jit_out, ref):
            np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)

    return layer, ref
