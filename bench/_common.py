"""The GPT that bench/train_speed.py and bench/gpu_bench.py train: its FLOP count, the keras_tfm build,
the optimizer and compile of every Keras row, and the same GPT in PyTorch (nanoGPT's layout) as a peer;
KerasHub's GPT-2 `generate`, the peer of bench/generate.py and bench/generate_backends.py.

Imported by the bench scripts as `_common` (they run as `python bench/NAME.py`, so bench/ is on the
path). Keras is imported inside the functions only: a script that picks the backend per subprocess
(bench/generate_backends.py) reads the sizes below without starting one.
"""

#: The tiny GPT of bench/generate.py and bench/generate_backends.py, and their workload: a prompt of
#: PROMPT tokens, NEW new tokens.
VOCAB, LAYERS, HEADS, D_MODEL, D_FF, MAX_LENGTH = 65, 4, 4, 128, 512, 2048
PROMPT, NEW = 16, 256


def step_flops(c):
    """FLOPs of one training step: 6·N·tokens + 12·L·T·d·tokens (N = 12·L·d² + d·V), forward + backward."""
    d, L, T, B, V = c["d_model"], c["num_layers"], c["seq_len"], c["batch"], c["vocab"]
    n = 12 * L * d * d + d * V
    tokens = B * T
    return 6 * n * tokens + 12 * L * T * d * tokens


def keras_tfm_gpt(c, **options):
    """`keras_tfm.models.gpt` of configuration `c` (no dropout); `options` go to the builder."""
    from keras_tfm.models import gpt

    return gpt(
        vocabulary_size=c["vocab"],
        max_length=c["seq_len"],
        num_layers=c["num_layers"],
        num_heads=c["num_heads"],
        d_model=c["d_model"],
        dropout=0.0,
        **options,
    )


def generation_gpt(max_length=MAX_LENGTH, num_key_value_heads=None):
    """The generation benches' `keras_tfm.models.gpt` of the sizes above (seed 0, no dropout)."""
    import keras

    from keras_tfm.models import gpt

    keras.utils.set_random_seed(0)
    kv = {} if num_key_value_heads is None else {"num_key_value_heads": num_key_value_heads}
    return gpt(
        vocabulary_size=VOCAB,
        max_length=max_length,
        num_layers=LAYERS,
        num_heads=HEADS,
        d_model=D_MODEL,
        d_ff=D_FF,
        dropout=0.0,
        **kv,
    )


def keras_hub_gpt2_generate(prompt_ids, new_tokens):
    """`run() -> token ids (batch, prompt + new)`: KerasHub's `GPT2CausalLM.generate` (random
    weights, seed 0, greedy, `preprocessor=None`, no stop id) of a GPT-2 of the sizes above on the
    left-aligned `prompt_ids` (batch, prompt) followed by `new_tokens` slots."""
    import keras
    import keras_hub
    import numpy as np

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=VOCAB,
        num_layers=LAYERS,
        num_heads=HEADS,
        hidden_dim=D_MODEL,
        intermediate_dim=D_FF,
        dropout=0.0,
        max_sequence_length=MAX_LENGTH,
    )
    lm = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    lm.compile(sampler="greedy")
    batch, prompt = prompt_ids.shape
    token_ids = np.zeros((batch, prompt + new_tokens), np.int32)
    token_ids[:, :prompt] = prompt_ids
    mask = np.zeros((batch, prompt + new_tokens), bool)
    mask[:, :prompt] = True
    inputs = {"token_ids": token_ids, "padding_mask": mask}
    return lambda: lm.generate(inputs, stop_token_ids=None)["token_ids"]


def adamw():
    """The optimizer of every Keras row: AdamW(1e-3, weight decay 0.1, β2 0.99, global-norm clip 1)."""
    import keras

    return keras.optimizers.AdamW(1e-3, weight_decay=0.1, beta_2=0.99, clipnorm=1.0)


def compile_lm(model, jit_compile, steps_per_execution):
    """The compile of every plain Keras row: `adamw()`, sparse categorical cross-entropy from logits,
    no metrics, `steps_per_execution` steps per compiled call."""
    import keras

    model.compile(
        optimizer=adamw(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
        steps_per_execution=steps_per_execution,
    )


def torch_gpt_trainer(c, data, device="cpu", tied_head=False, gelu="none", compile_model=False):
    """The same GPT in PyTorch (nanoGPT's layout: fused c_attn, `scaled_dot_product_attention`) and its
    training step: AdamW(1e-3, β2 0.99, wd 0.1; fused on CUDA), global-norm clipping 1, bf16 autocast on
    CUDA.

    Args:
        c: the configuration (num_layers, num_heads, d_model, seq_len, vocab).
        data: `(x, y)` int arrays of batches, each of shape (batches, batch, seq_len).
        device: "cpu" or "cuda".
        tied_head: the output projection is the token embedding (keras_tfm's GPT) or its own Linear.
        gelu: `F.gelu`'s `approximate` ("none" or "tanh").
        compile_model: `torch.compile` the forward pass.

    Returns:
        `step(i) -> loss` (trains on batch `i % batches`), and the number of batches.
    """
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    d, h, T, V = c["d_model"], c["num_heads"], c["seq_len"], c["vocab"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate=gelu))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, d), nn.Embedding(T, d)
            self.blocks = nn.ModuleList(Block() for _ in range(c["num_layers"]))
            self.ln_f = nn.LayerNorm(d)
            self.head = None if tied_head else nn.Linear(d, V)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                x = block(x)
            x = self.ln_f(x)
            return x @ self.wte.weight.T if self.head is None else self.head(x)

    model = GPT().to(device)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1, fused=device == "cuda"
    )
    forward = torch.compile(model) if compile_model else model
    xs = [torch.from_numpy(b.astype("int64")).to(device) for b in data[0]]
    ys = [torch.from_numpy(b.astype("int64")).to(device) for b in data[1]]
    autocast = torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda")

    def step(i):
        with autocast:
            logits = forward(xs[i % len(xs)])
            loss = F.cross_entropy(logits.float().view(-1, V), ys[i % len(ys)].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return step, len(xs)
