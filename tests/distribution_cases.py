"""Model parallelism on 8 virtual JAX CPU devices: `get_layout_map` under `ModelParallel`.

Needs KERAS_BACKEND=jax, JAX_PLATFORMS=cpu and XLA_FLAGS=--xla_force_host_platform_device_count=8
set before JAX starts: `tests/test_distribution.py` runs this file in one subprocess with them (it
is not a `test_*.py` file, so the suite does not collect it on the TensorFlow backend).

One `fit` step (SGD, so that the update is linear in the gradient) under ModelParallel on a 2 × 4
and a 1 × 8 mesh gives the loss and weights of the single-device step; LoRA trains A and B only;
a `.keras` file of a sharded model loads on one device; `from_pretrained` loads MiniLM straight
into its layout; each device holds 1/N of a split variable's bytes; `memory_plan`'s parameter and
optimizer bytes equal the measured shards, its peak the compiled step's within 20 %.
"""

import os
import warnings

import keras
import numpy as np
import pytest

if keras.backend.backend() != "jax" or len(keras.distribution.list_devices()) != 8:
    raise RuntimeError("Run through tests/test_distribution.py (JAX, 8 virtual CPU devices).")

from keras_tfm.models import (  # noqa: E402
    GPT,
    BertClassifier,
    BertEncoder,
    Seq2Seq,
    ViT,
    bert_classifier,
    gpt,
    seq2seq,
    vit_classifier,
)

MINILM = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "all-MiniLM-L6-v2")
MESHES = {"2x4": (2, 4), "1x8": (1, 8)}
B, T = 4, 8


def mesh(shape):
    return keras.distribution.DeviceMesh(shape, ("batch", "model"), keras.distribution.list_devices())


def distribution(model_class, shape, **options):
    return keras.distribution.ModelParallel(
        layout_map=model_class.get_layout_map(mesh(shape), **options), batch_dim_name="batch"
    )


def _tokens(rng, vocabulary, shape=(B, T)):
    return rng.integers(1, vocabulary, size=shape).astype("int32")


#: name → (model class, builder, batch maker). Sizes chosen so that on 2 × 4 every split dimension
#: divides and on 1 × 8 some do not (4 heads, 4 key/value heads): the fallback is exercised.
CASES = {
    "gpt2": (GPT, lambda: gpt("tiny", num_heads=4), lambda r: (_tokens(r, 64), _tokens(r, 64))),
    "llama": (
        GPT,
        lambda: gpt("llama_tiny", num_layers=1, d_model=64, num_heads=8, num_key_value_heads=4, d_ff=128),
        lambda r: (_tokens(r, 65), _tokens(r, 65)),
    ),
    "bert": (
        BertClassifier,
        lambda: bert_classifier("tiny", 2, num_heads=4, num_layers=1),
        lambda r: (
            {
                "token_ids": _tokens(r, 64),
                "segment_ids": np.zeros((B, T), "int32"),
                "padding_mask": np.ones((B, T), "int32"),
            },
            r.integers(0, 2, size=(B,)).astype("int32"),
        ),
    ),
    "seq2seq": (
        Seq2Seq,
        lambda: seq2seq("tiny", num_layers=1),
        lambda r: (
            {"encoder_token_ids": _tokens(r, 32), "decoder_token_ids": _tokens(r, 32)},
            _tokens(r, 32),
        ),
    ),
    "vit": (
        ViT,
        lambda: vit_classifier(8, 4, 3, num_layers=1, num_heads=4, d_model=32),
        lambda r: (
            r.normal(size=(B, 8, 8, 3)).astype("float32"),
            r.integers(0, 3, size=(B,)).astype("int32"),
        ),
    ),
}


def _compile(model):
    model.compile(
        optimizer=keras.optimizers.SGD(0.5),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )


def _fit_step(model, batch):
    x, y = batch
    return model.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0).history["loss"][0]


@pytest.fixture(scope="module")
def references():
    """name → (initial weights, loss, updated weights) of the single-device step."""
    out = {}
    for name, (_, build, make_batch) in CASES.items():
        keras.utils.set_random_seed(0)
        model = build()
        initial = model.get_weights()
        _compile(model)
        batch = make_batch(np.random.default_rng(0))
        loss = _fit_step(model, batch)
        out[name] = (initial, loss, model.get_weights(), batch)
    return out


@pytest.fixture(scope="module")
def sharded_models():
    return {}


@pytest.mark.parametrize("mesh_name", list(MESHES))
@pytest.mark.parametrize("name", list(CASES))
def test_fit_step_equals_single_device(name, mesh_name, references, sharded_models):
    model_class, build, _ = CASES[name]
    initial, loss, updated, batch = references[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with distribution(model_class, MESHES[mesh_name]).scope():
            model = build()
            model.set_weights(initial)
            _compile(model)
            sharded_loss = _fit_step(model, batch)
    split = [v.path for v in model.weights if "model" in tuple(v.value.sharding.spec)]
    assert any("query/kernel" in path for path in split) or mesh_name == "1x8", split
    assert any("feed_forward/inner/kernel" in path for path in split), split
    fallbacks = [str(w.message) for w in caught if "get_layout_map" in str(w.message)]
    if mesh_name == "1x8" and name != "llama":  # 4 heads on 8 devices
        assert any("query/kernel" in message and "num_heads=4" in message for message in fallbacks), fallbacks
    np.testing.assert_allclose(sharded_loss, loss, rtol=1e-5, atol=1e-5)
    for variable, expected in zip(model.weights, updated):
        np.testing.assert_allclose(
            np.asarray(variable.value), expected, rtol=1e-5, atol=1e-5, err_msg=variable.path
        )
    sharded_models[(name, mesh_name)] = model


def test_sharded_variables_hold_their_share_of_bytes(sharded_models):
    """Each device's shard of a split variable is 1/N of its bytes, N the devices along its axes."""
    model = _sharded(sharded_models, "llama", "2x4")
    split = 0
    for variable in model.weights:
        value = variable.value
        spec = tuple(value.sharding.spec)
        n = int(np.prod([4 if axis == "model" else 2 for axis in spec if axis is not None]))
        shards = value.addressable_shards
        assert len(shards) == 8
        for shard in shards:
            assert shard.data.nbytes * n == value.nbytes, (variable.path, spec)
        split += n > 1
    assert split >= 7  # embedding? no (65 rows); q, k, v, out, inner, gate, output


def test_fully_sharded_splits_over_both_axes():
    with distribution(GPT, (2, 4), fully_sharded=True).scope():
        model = CASES["llama"][1]()
    kernel = next(v for v in model.weights if v.path.endswith("query/kernel")).value
    assert tuple(kernel.sharding.spec) == ("batch", "model", None)
    assert kernel.addressable_shards[0].data.nbytes * 8 == kernel.nbytes


def test_indivisible_dimension_replicated_with_a_warning():
    """The tiny preset's 2 key/value heads on 4 devices: replicated, warned, no IndivisibleError."""
    with pytest.warns(UserWarning, match=r"self_attention/key/kernel` dimension 1 \(num_key_value_heads=2\)"):
        with distribution(GPT, (2, 4)).scope():
            model = gpt("llama_tiny", num_layers=1)
    key = next(v for v in model.weights if v.path.endswith("key/kernel"))
    assert tuple(key.value.sharding.spec) == (None, None, None)
    layout = model.get_layout_map(mesh((2, 4)))["decoder_block_0/self_attention/query/kernel"]
    assert tuple(layout.axes) == (None, "model", None)


def test_bad_mesh_arguments():
    with pytest.raises(ValueError, match=r"`model_parallel_dim_name` must be an axis of `device_mesh`"):
        GPT.get_layout_map(mesh((2, 4)), model_parallel_dim_name="tensor")
    with pytest.raises(TypeError, match=r"`device_mesh` must be a keras.distribution.DeviceMesh"):
        BertEncoder.get_layout_map((2, 4))


def test_lora_under_model_parallel_trains_only_a_and_b(references):
    initial, _, _, batch = references["llama"]
    with distribution(GPT, (2, 4)).scope():
        model = CASES["llama"][1]()
        model.set_weights(initial)
        model.enable_lora(2, target=("query", "value", "ffn_output"))
        _compile(model)
        before = {v.path: np.asarray(v.value) for v in model.weights}
        _fit_step(model, batch)
    trainable = {v.path for v in model.trainable_weights}
    assert trainable and all("lora_kernel" in path for path in trainable), trainable
    a = next(v for v in model.weights if v.path.endswith("query/lora_kernel_a"))
    assert tuple(a.value.sharding.spec) == (None, "model", None)
    changed = {v.path for v in model.weights if not np.array_equal(np.asarray(v.value), before[v.path])}
    assert changed and changed <= trainable, changed - trainable


def _sharded(sharded_models, name, mesh_name):
    """The model the fit test trained (built here when that test was deselected)."""
    if (name, mesh_name) not in sharded_models:
        with distribution(CASES[name][0], MESHES[mesh_name]).scope():
            sharded_models[(name, mesh_name)] = CASES[name][1]()
    return sharded_models[(name, mesh_name)]


def test_keras_file_of_a_sharded_model_loads_on_one_device(sharded_models, references, tmp_path):
    model = _sharded(sharded_models, "gpt2", "2x4")
    path = str(tmp_path / "sharded.keras")
    model.save(path)
    x = references["gpt2"][3][0]
    expected = np.asarray(model.predict(x, batch_size=B, verbose=0))  # one compiled call, sharded
    loaded = keras.saving.load_model(path)
    assert all(len(v.value.sharding.device_set) == 1 for v in loaded.weights)
    np.testing.assert_allclose(np.asarray(loaded(x)), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not os.path.isdir(MINILM), reason=f"all-MiniLM-L6-v2 not found at {MINILM}")
def test_from_pretrained_loads_straight_into_a_sharded_layout():
    from safetensors import safe_open

    from keras_tfm.models import from_pretrained

    with pytest.warns(UserWarning, match=r"token_embedding/embeddings` dimension 0 \(vocabulary=30522\)"):
        with distribution(BertEncoder, (2, 4)).scope():
            model = from_pretrained(MINILM)
    weights = {v.path: v for v in model.weights}
    query = weights["encoder_block_0/self_attention/query/kernel"].value
    assert tuple(query.sharding.spec) == (None, "model", None)  # 12 heads over 4 devices
    assert query.addressable_shards[0].data.shape == (384, 3, 32)
    inner = weights["encoder_block_5/feed_forward/inner/kernel"].value
    assert inner.addressable_shards[0].data.shape == (384, 1536 // 4)
    with safe_open(os.path.join(MINILM, "model.safetensors"), "np") as tensors:
        prefix = "" if "embeddings.word_embeddings.weight" in tensors.keys() else "bert."
        file_query = tensors.get_tensor(prefix + "encoder.layer.0.attention.self.query.weight")  # (out, in)
        file_inner = tensors.get_tensor(prefix + "encoder.layer.5.intermediate.dense.weight")
    np.testing.assert_array_equal(np.asarray(query), file_query.T.reshape(384, 12, 32))
    np.testing.assert_array_equal(np.asarray(inner), file_inner.T)


# --------------------------------------------------------------------------- memory plan
def _bytes_on_first_device(variables):
    device = keras.distribution.list_devices()[0]
    total = 0
    for variable in variables:
        shards = [
            s for s in variable.value.addressable_shards if f"{s.device.platform}:{s.device.id}" == device
        ]
        total += shards[0].data.nbytes
    return total


@pytest.mark.parametrize(
    "layout_name, shape, lora",
    [("data", (8, 1), None), ("model", (1, 8), None), ("model", (2, 4), 2), ("full", (2, 4), None)],
)
def test_memory_plan_parameters_and_optimizer_equal_the_shards(layout_name, shape, lora):
    from keras_tfm.models import memory_plan

    if layout_name == "data":
        scope = keras.distribution.DataParallel(devices=keras.distribution.list_devices())
    else:
        scope = distribution(GPT, shape, fully_sharded=layout_name == "full")
    with scope.scope():
        model = CASES["llama"][1]()
        if lora:
            model.enable_lora(lora)
        optimizer = keras.optimizers.AdamW(1e-3)
        optimizer.build(model.trainable_variables)
    plan = memory_plan(model, devices=8, batch=8, max_length=T, model_devices=shape[1])[layout_name]
    assert plan.mesh == shape
    assert plan.parameters == _bytes_on_first_device(model.weights)
    assert plan.gradients == _bytes_on_first_device(model.trainable_variables)
    assert plan.optimizer == _bytes_on_first_device(optimizer.variables)


def _compiled_step_peak(model, x):
    """Peak bytes of one AdamW training step as XLA allocates it: arguments + outputs + temporaries
    − the donated (aliased) buffers of `jax.jit(step).lower(...).compile().memory_analysis()`."""
    import jax

    optimizer = keras.optimizers.AdamW(1e-3)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def step(trainable, non_trainable, optimizer_variables, x):
        def loss(trainable):
            logits, _ = model.stateless_call(trainable, non_trainable, x, training=True)
            return loss_fn(x, logits)

        value, grads = jax.value_and_grad(loss)(trainable)
        trainable, optimizer_variables = optimizer.stateless_apply(optimizer_variables, grads, trainable)
        return value, trainable, optimizer_variables

    args = (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in optimizer.variables],
        x,
    )
    stats = jax.jit(step, donate_argnums=(0, 2)).lower(*args).compile().memory_analysis()
    return (
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        + stats.temp_size_in_bytes
        - stats.alias_size_in_bytes
    )


@pytest.mark.parametrize("name, batch, length", [("gpt2", 8, 32), ("llama", 8, 64)])
def test_memory_plan_total_within_20_percent_of_the_compiled_step(name, batch, length):
    from keras_tfm.models import memory_plan

    model = CASES[name][1]()
    x = _tokens(np.random.default_rng(0), 64, (batch, length))
    peak = _compiled_step_peak(model, x)
    plan = memory_plan(model, devices=1, batch=batch, max_length=length, precision="float32")["data"]
    assert abs(plan.total / peak - 1) < 0.2, (plan, peak)


def test_memory_plan_of_a_preset_equals_that_of_the_built_model():
    from keras_tfm.models import memory_plan

    for preset in ("tiny", "llama_tiny"):
        by_name = memory_plan(preset, devices=8, batch=8, max_length=16, precision="float32", lora_rank=4)
        built = memory_plan(gpt(preset), devices=8, batch=8, max_length=16, precision="float32", lora_rank=4)
        assert by_name == built
