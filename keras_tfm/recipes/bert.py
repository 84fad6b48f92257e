"""Recipe `bert`: BERT masked-LM pretraining on the SST-2 training sentences, then the SST-2 classifier.

    results = train_bert(data="sst2_sentence_level", steps=400, output="runs/bert")

`train_bert` takes the fields of `BertOptions` as keyword arguments and returns the results dict.
"""

import dataclasses
import os
import time
from typing import Any

from keras_tfm.checks import check_float, check_positive_float, check_positive_int
from keras_tfm.recipes import _runtime as runtime
from keras_tfm.recipes import output as output_lib
from keras_tfm.recipes.options import TrainingOptions, argument_error, check_data_source
from keras_tfm.recipes.output import Trained

HELP = "BERT MLM pretraining + SST-2 classification"
METRIC_HELP = "a '<label> <sentence>' file: accuracy"
LABELS = ("negative", "positive")
SPLIT_FILE = "stsa.binary.{}"


@dataclasses.dataclass(kw_only=True)
class BertOptions(TrainingOptions):
    """The options of `train_bert`: `TrainingOptions` and these.

    Attributes:
        data: folder holding stsa.binary.{train,dev,test} ('<label> <sentence>' lines); None = TFDS
            glue/sst2 (downloaded, or read from `manual_dir`).
        manual_dir: folder holding the manual download of TFDS glue/sst2 (offline).
        tfds_data_dir: TFDS data_dir (None = ~/tensorflow_datasets).
        vocabulary_size: size of the WordPiece vocabulary learned from the training sentences.
        max_length: tokens per sentence (the model's context).
        steps: optimizer steps of the whole run: `steps // 2` masked-LM pretraining, the rest
            fine-tuning; None = `pretrain_steps` + `finetune_epochs`.
        pretrain_steps: masked-LM steps (when `steps` is None).
        finetune_epochs: classifier epochs (when `steps` is None).
        finetune_batch_size, finetune_learning_rate: the classifier stage's batch and peak rate.
        mask_rate: share of the tokens selected for masked-LM.
        learning_rate: peak learning rate of the pretraining.
    """

    data: str | None = None
    manual_dir: str | None = None
    tfds_data_dir: str | None = None
    vocabulary_size: int = 4000
    max_length: int = 48
    num_layers: int = 2
    num_heads: int = 4
    d_model: int = 128
    d_ff: int | None = 512
    dropout: float = 0.1
    pretrain_steps: int = 800
    finetune_epochs: int = 8
    finetune_batch_size: int = 32
    finetune_learning_rate: float = 2e-4
    mask_rate: float = 0.15
    steps: int | None = None
    batch_size: int = 64
    eval_interval: int = 200
    learning_rate: float = 1e-3

    def __post_init__(self):
        super().__post_init__()
        check_data_source(self)
        for name in (
            "vocabulary_size",
            "max_length",
            "pretrain_steps",
            "finetune_epochs",
            "finetune_batch_size",
        ):
            check_positive_int(name, getattr(self, name))
        if self.steps is not None and self.steps < 2:
            raise ValueError(f"`steps` must be >= 2 (one per stage); received {self.steps}.")
        check_positive_float("learning_rate", self.learning_rate)
        check_positive_float("finetune_learning_rate", self.finetune_learning_rate)
        check_float("mask_rate", self.mask_rate, low=0.0, high=1.0, low_open=True, high_open=True)


def load_sst2(
    data: str | None = None, manual_dir: str | None = None, tfds_data_dir: str | None = None
) -> dict[str, tuple[list[str], list[int]]]:
    """{split: (sentences, labels)} for train, dev (and test when present): the files of the folder `data`,
    or TFDS glue/sst2."""
    from keras_tfm.data import load_glue_sst2

    splits = {}
    if data:
        if not os.path.isdir(data):
            raise ValueError(
                f"`data` must be a folder holding {SPLIT_FILE.format('train')}; received {data!r}."
            )
        for split in ("train", "dev", "test"):
            path = os.path.join(data, SPLIT_FILE.format(split))
            if os.path.exists(path):
                splits[split] = read_label_sentences(path)
    else:
        for split, tfds_split in (("train", "train"), ("dev", "validation")):
            ds = load_glue_sst2(
                tfds_split, data_dir=tfds_data_dir, manual_dir=manual_dir, download=manual_dir is None
            )
            rows = list(ds.as_numpy_iterator())
            splits[split] = ([s.decode("utf-8") for s, _ in rows], [int(y) for _, y in rows])
    if "train" not in splits or "dev" not in splits:
        raise ValueError("`data`: SST-2 needs a train and a dev split (stsa.binary.train, stsa.binary.dev).")
    return splits


def read_label_sentences(path, argument="data"):
    """(sentences, labels) of a '<label> <sentence>' file; errors name `argument`."""
    from keras_tfm.data import load_label_sentence_lines

    try:
        rows = list(load_label_sentence_lines(path).as_numpy_iterator())
    except (OSError, ValueError) as error:
        raise argument_error(argument, error) from None
    if not rows:
        raise ValueError(f"`{argument}`: {path!r} holds no '<label> <sentence>' lines.")
    return [s.decode("utf-8") for s, _ in rows], [int(y) for _, y in rows]


def stage_steps(o, num_train):
    """(pretraining steps, fine-tuning steps, fine-tuning steps per epoch) from the options."""
    per_epoch = max(1, num_train // o.finetune_batch_size)
    if o.steps is None:
        return o.pretrain_steps, per_epoch * o.finetune_epochs, per_epoch
    return o.steps // 2, o.steps - o.steps // 2, per_epoch


def encoder_inputs(token_ids):
    """The BERT encoder's input dict for a batch of single-segment `token_ids` (NumPy or tensors)."""
    import tensorflow as tf

    return {
        "token_ids": token_ids,
        "segment_ids": tf.zeros_like(token_ids),
        "padding_mask": tf.cast(tf.not_equal(token_ids, 0), tf.int32),
    }


def train_bert(**options: Any) -> dict[str, Any]:
    """Masked-LM pretraining on the training sentences, then fine-tuning; reports dev (and test) accuracy.

    Args:
        **options: the fields of `BertOptions`.

    Returns:
        dict: "steps", "mlm_steps", "mlm_dev_loss", "mlm_dev_masked_accuracy", "finetune_steps",
        "dev_accuracy" (and "test_accuracy" with a test split), "dev_accuracy_per_epoch", the times,
        "output_path" / "export_path" when written, and the trained "model" (the classifier) and its
        "tokenizer".

    Raises:
        ValueError / TypeError / FileNotFoundError naming the option, before any training.
    """
    t_start = time.perf_counter()
    o = BertOptions(**options)
    output_lib.check_output_options(o)
    strategy = runtime.setup(o)
    import numpy as np

    tokenizer, x, y = _tokenized_splits(o)
    pretrain_steps, finetune_steps, per_epoch = stage_steps(o, len(y["train"]))
    pre, holder = _pretrain(o, tokenizer, x, strategy, pretrain_steps)
    mlm_loss = pre.history.get("val_loss", [float("nan")])[-1]
    mlm_acc = pre.history.get("val_accuracy", [float("nan")])[-1]
    runtime.log(f"MLM dev loss {mlm_loss:.4f}, masked-token accuracy {mlm_acc:.4f}")
    ft, dev = _finetune(o, holder, x, y, strategy, finetune_steps, per_epoch)
    classifier = ft.model
    classifier.tokenizer = tokenizer  # saved in the .keras file with the model
    dev_acc = float(classifier.evaluate(dev, verbose=0, return_dict=True)["accuracy"])
    results = {
        "steps": pre.steps + ft.steps,
        "mlm_steps": pre.steps,
        "mlm_dev_loss": mlm_loss,
        "mlm_dev_masked_accuracy": mlm_acc,
        "finetune_steps": ft.steps,
        "dev_accuracy": dev_acc,
        "dev_accuracy_per_epoch": ft.history.get("val_accuracy", []),
        "pretrain_seconds": pre.seconds,
        "finetune_seconds": ft.seconds,
    }
    if "test" in x:
        results["test_accuracy"] = float(
            classifier.evaluate(_labelled(x, y, "test"), verbose=0, return_dict=True)["accuracy"]
        )
    majority = max(np.mean(y["dev"]), 1 - np.mean(y["dev"]))
    runtime.log(
        f"SST-2 dev accuracy {dev_acc:.4f} (majority class {majority:.4f})"
        + (f", test accuracy {results['test_accuracy']:.4f}" if "test_accuracy" in results else "")
    )
    written = output_lib.save_trained(
        o, "bert", classifier, {"tokenizer": tokenizer}, results, labels=LABELS, log=runtime.log
    )
    results.update({f"{key}_path": path for key, path in written.items()})
    results["total_seconds"] = time.perf_counter() - t_start
    runtime.log(
        f"wall time: pretraining {pre.seconds:.1f} s, fine-tuning {ft.seconds:.1f} s, "
        f"total {results['total_seconds']:.1f} s"
    )
    runtime.write_results(o, results)
    results["model"] = classifier
    results["tokenizer"] = tokenizer
    return results


def _tokenized_splits(o):
    """The WordPiece tokenizer learned from the training sentences, and per split
    `{split: token ids (n, max_length)}` and `{split: labels (n,)}`, both int32."""
    import numpy as np
    import tensorflow as tf

    from keras_tfm.tokenizers import WordPieceTokenizer

    splits = load_sst2(o.data, o.manual_dir, o.tfds_data_dir)
    train_sentences, _ = splits["train"]
    tokenizer = WordPieceTokenizer.from_corpus(
        train_sentences, o.vocabulary_size, add_cls_sep=True, max_length=o.max_length
    )
    x = {k: tokenizer(tf.constant(v[0])).numpy().astype("int32") for k, v in splits.items()}
    y = {k: np.asarray(v[1], "int32") for k, v in splits.items()}
    runtime.log(
        "data: "
        + ", ".join(f"{k} {len(v):,}" for k, v in y.items())
        + f" sentences; WordPiece vocabulary {tokenizer.vocabulary_size}"
    )
    return tokenizer, x, y


def _pretrain(o, tokenizer, x, strategy, pretrain_steps):
    """Stage 1, masked-LM pretraining on the training sentences (no labels).

    Returns:
        `(run, holder)`: the `training.train` result and `{"encoder": the encoder}` (the one
        the last `build_mlm` call built).
    """
    import tensorflow as tf

    from keras_tfm import models, training
    from keras_tfm.data import mlm_mask

    def with_inputs(features, labels, weights):
        inputs = encoder_inputs(features["token_ids"])
        inputs["padding_mask"] = tf.cast(features["padding_mask"], tf.int32)
        return inputs, labels, weights

    train_ids = tf.data.Dataset.from_tensor_slices(x["train"])

    def mlm_data(start_step):
        ds = train_ids.repeat().shuffle(10_000, seed=o.seed).batch(o.batch_size, drop_remainder=True)
        ds = mlm_mask(ds, mask_rate=o.mask_rate, seed=o.seed, tokenizer=tokenizer)
        return runtime.skip(ds.map(with_inputs, num_parallel_calls=tf.data.AUTOTUNE), start_step)

    dev_ids = tf.data.Dataset.from_tensor_slices(x["dev"]).batch(256)
    mlm_val = mlm_mask(dev_ids, mask_rate=o.mask_rate, seed=o.seed + 1, tokenizer=tokenizer)
    mlm_val = mlm_val.map(with_inputs).cache()
    holder = {}

    def build_mlm():
        encoder = models.bert_encoder(
            vocabulary_size=tokenizer.vocabulary_size,
            max_length=o.max_length,
            **o.model_sizes(),
        )
        holder["encoder"] = encoder
        optimizer = runtime.adamw_decay_schedule(
            o, o.learning_rate, pretrain_steps, min(200, pretrain_steps // 10), min_ratio=0.1
        )
        return training.compile_for_lm(
            models.bert_masked_lm(encoder),
            optimizer,
            ignore_index=None,
            jit_compile=o.jit_compile,
            steps_per_execution=o.steps_per_execution,
        )

    runtime.log(f"== 1. masked-LM pretraining: {pretrain_steps} steps of {o.batch_size} sentences ==")
    return runtime.train(o, build_mlm, mlm_data, mlm_val, strategy, pretrain_steps, stage="pretrain"), holder


def _labelled(x, y, split):
    """The batched, cached `(encoder inputs, label)` dataset of `split`."""
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices((encoder_inputs(x[split]), y[split])).batch(256).cache()


def _finetune(o, holder, x, y, strategy, finetune_steps, per_epoch):
    """Stage 2, fine-tuning a classifier on `holder["encoder"]`.

    Returns:
        `(run, dev)`: the `training.train` result and the dev dataset it validated on.
    """
    import tensorflow as tf

    from keras_tfm import models, training

    n_train = len(y["train"])

    def ft_data(start_step):
        ds = tf.data.Dataset.from_tensor_slices((encoder_inputs(x["train"]), y["train"]))
        ds = ds.repeat().shuffle(n_train, seed=o.seed).batch(o.finetune_batch_size, drop_remainder=True)
        return runtime.skip(ds, start_step)

    dev = _labelled(x, y, "dev")

    def build_classifier():
        with strategy.scope():
            classifier = models.bert_classifier(holder["encoder"], num_classes=2, pooling="cls")
            optimizer = runtime.adamw_decay_schedule(
                o,
                o.finetune_learning_rate,
                finetune_steps,
                max(1, finetune_steps // 10),
                min_ratio=1e-3,
            )
            return training.compile_for_classification(
                classifier,
                optimizer,
                jit_compile=o.jit_compile,
                steps_per_execution=o.steps_per_execution,
            )

    runtime.log(
        f"== 2. fine-tuning: {finetune_steps} steps of {o.finetune_batch_size} "
        f"({finetune_steps / per_epoch:.3g} epochs of {per_epoch} steps) =="
    )
    ft = runtime.train(
        o,
        build_classifier,
        ft_data,
        dev,
        strategy,
        finetune_steps,
        min(per_epoch, finetune_steps),
        "finetune",
    )
    return ft, dev


def evaluate_bert(trained: Trained, data: str) -> dict[str, float]:
    """The accuracy of a trained BERT classifier (`output.load_trained`) on the '<label> <sentence>' file
    `data`.

    Returns:
        {"accuracy", "loss", "sentences"}.
    """
    import numpy as np
    import tensorflow as tf

    from keras_tfm import training

    tokenizer = trained.tokenizers.get("tokenizer")
    if tokenizer is None:
        raise ValueError(f"`model`: no {output_lib.TOKENIZER_FILES['tokenizer']} beside the model.")
    if not os.path.isfile(data):
        raise ValueError(f"`data` must be a '<label> <sentence>' file; received {data!r}.")
    sentences, labels = read_label_sentences(data)
    ids = tokenizer(tf.constant(sentences)).numpy().astype("int32")
    dataset = tf.data.Dataset.from_tensor_slices((encoder_inputs(ids), np.asarray(labels, "int32"))).batch(
        256
    )
    training.compile_for_classification(trained.model, "adam", jit_compile=False)
    metrics = trained.model.evaluate(dataset, verbose=0, return_dict=True)
    return {"accuracy": float(metrics["accuracy"]), "loss": float(metrics["loss"]), "sentences": len(labels)}
