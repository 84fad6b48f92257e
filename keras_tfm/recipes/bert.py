"""Recipe `bert`: BERT masked-LM pretraining on the SST-2 training sentences, then the SST-2 classifier."""

import os
import time

from keras_tfm.checks import positive_int_arg
from keras_tfm.recipes import _options as options
from keras_tfm.recipes import _runtime as runtime
from keras_tfm.recipes import output as output_lib
from keras_tfm.recipes._options import UsageError

HELP = "BERT MLM pretraining + SST-2 classification"
LABELS = ("negative", "positive")
SPLIT_FILE = "stsa.binary.{}"


def add_bert_arguments(parser):
    d = options.add_data_arguments(
        parser, "folder with stsa.binary.{train,dev,test} ('<label> <sentence>' lines)", tfds="glue/sst2"
    )
    options.add_alias(parser, "--data-dir", "--data", "data")
    d.add_argument(
        "--vocabulary-size",
        type=positive_int_arg,
        default=4000,
        help=options.default_text("WordPiece vocabulary"),
    )
    d.add_argument(
        "--sequence-length",
        type=positive_int_arg,
        default=48,
        help=options.default_text("tokens per sentence"),
    )
    options.add_model_arguments(parser, num_layers=2, num_heads=4, d_model=128, d_ff=512, dropout=0.1)
    s = parser.add_argument_group(
        "stages: masked-LM pretraining, then fine-tuning "
        "(--steps N splits a budget of N optimizer steps: N // 2 pretraining, the rest fine-tuning)"
    )
    s.add_argument(
        "--pretrain-steps", type=positive_int_arg, default=800, help=options.default_text("MLM steps")
    )
    s.add_argument(
        "--finetune-epochs", type=positive_int_arg, default=8, help=options.default_text("classifier epochs")
    )
    s.add_argument("--finetune-batch-size", type=positive_int_arg, default=32, help=options.default_text(""))
    s.add_argument("--finetune-learning-rate", type=float, default=2e-4, help=options.default_text(""))
    s.add_argument("--mask-rate", type=float, default=0.15, help=options.default_text("MLM selection rate"))
    options.add_output_arguments(parser)
    options.add_training_arguments(
        parser,
        steps=None,
        batch_size=64,
        steps_per_epoch=200,
        learning_rate=1e-3,
        steps_help="optimizer steps of the whole run (both stages); default: --pretrain-steps + --finetune-epochs",
    )


def load_sst2(args):
    """{split: (sentences, labels)} for train, dev (and test when present)."""
    from keras_tfm.data import load_glue_sst2

    splits = {}
    if args.data:
        if not os.path.isdir(args.data):
            raise UsageError(
                "--data", f"expected a folder holding {SPLIT_FILE.format('train')}; received {args.data!r}"
            )
        for split in ("train", "dev", "test"):
            path = os.path.join(args.data, SPLIT_FILE.format(split))
            if os.path.exists(path):
                splits[split] = read_label_sentences(path)
    else:
        for split, tfds_split in (("train", "train"), ("dev", "validation")):
            ds = load_glue_sst2(
                tfds_split,
                data_dir=args.tfds_data_dir,
                manual_dir=args.manual_dir,
                download=args.manual_dir is None,
            )
            rows = list(ds.as_numpy_iterator())
            splits[split] = ([s.decode("utf-8") for s, _ in rows], [int(y) for _, y in rows])
    if "train" not in splits or "dev" not in splits:
        raise UsageError("--data", "SST-2 needs a train and a dev split (stsa.binary.train, stsa.binary.dev)")
    return splits


def read_label_sentences(path, flag="--data"):
    """(sentences, labels) of a '<label> <sentence>' file."""
    from keras_tfm.data import load_label_sentence_lines

    try:
        rows = list(load_label_sentence_lines(path).as_numpy_iterator())
    except (OSError, ValueError) as error:
        raise UsageError(flag, str(error)) from None
    return [s.decode("utf-8") for s, _ in rows], [int(y) for _, y in rows]


def check_stage_options(args):
    options.check_positive_options(args, ("pretrain_steps", "finetune_epochs", "finetune_batch_size"))
    if args.steps is not None and args.steps < 2:
        raise UsageError("--steps", f"must be >= 2 (one per stage); received {args.steps}")


def stage_steps(args, num_train):
    """(pretraining steps, fine-tuning steps, fine-tuning steps per epoch) from the options."""
    per_epoch = max(1, num_train // args.finetune_batch_size)
    if args.steps is None:
        return args.pretrain_steps, per_epoch * args.finetune_epochs, per_epoch
    return args.steps // 2, args.steps - args.steps // 2, per_epoch


def encoder_inputs(token_ids):
    """The BERT encoder's input dict for a batch of single-segment `token_ids` (NumPy or tensors)."""
    import tensorflow as tf

    return {
        "token_ids": token_ids,
        "segment_ids": tf.zeros_like(token_ids),
        "padding_mask": tf.cast(tf.not_equal(token_ids, 0), tf.int32),
    }


def run_bert(args):
    """MLM pretraining on the training sentences, then fine-tuning; reports dev (and test) accuracy."""
    t_start = time.perf_counter()
    output_lib.check_output_arguments(args)
    check_stage_options(args)
    strategy = runtime.setup(args)
    import numpy as np
    import tensorflow as tf

    from keras_tfm import models, training
    from keras_tfm.data import mlm_mask
    from keras_tfm.tokenizers import WordPieceTokenizer

    splits = load_sst2(args)
    train_sentences, _ = splits["train"]
    tokenizer = WordPieceTokenizer.from_corpus(
        train_sentences, args.vocabulary_size, add_cls_sep=True, sequence_length=args.sequence_length
    )
    vocab = tokenizer.vocabulary_size
    x = {k: tokenizer(tf.constant(v[0])).numpy().astype("int32") for k, v in splits.items()}
    y = {k: np.asarray(v[1], "int32") for k, v in splits.items()}
    runtime.log(
        "data: "
        + ", ".join(f"{k} {len(v):,}" for k, v in y.items())
        + f" sentences; WordPiece vocabulary {vocab}"
    )
    pretrain_steps, finetune_steps, per_epoch = stage_steps(args, len(y["train"]))

    # ---- 1. masked-LM pretraining on the training sentences (no labels) ---- #
    def with_inputs(features, labels, weights):
        inputs = encoder_inputs(features["token_ids"])
        inputs["padding_mask"] = tf.cast(features["padding_mask"], tf.int32)
        return inputs, labels, weights

    train_ids = tf.data.Dataset.from_tensor_slices(x["train"])

    def mlm_data(start_step):
        ds = train_ids.repeat().shuffle(10_000, seed=args.seed).batch(args.batch_size, drop_remainder=True)
        ds = mlm_mask(ds, mask_rate=args.mask_rate, seed=args.seed, tokenizer=tokenizer)
        return runtime.skip(ds.map(with_inputs, num_parallel_calls=tf.data.AUTOTUNE), start_step)

    dev_ids = tf.data.Dataset.from_tensor_slices(x["dev"]).batch(256)
    mlm_val = mlm_mask(dev_ids, mask_rate=args.mask_rate, seed=args.seed + 1, tokenizer=tokenizer)
    mlm_val = mlm_val.map(with_inputs).cache()
    holder = {}

    def build_mlm():
        encoder = models.bert_encoder(
            vocabulary_size=vocab,
            max_length=args.sequence_length,
            **options.model_sizes(args),
        )
        holder["encoder"] = encoder
        optimizer = runtime.adamw_decay_schedule(
            args, args.learning_rate, pretrain_steps, min(200, pretrain_steps // 10), min_ratio=0.1
        )
        return training.compile_for_lm(
            models.bert_masked_lm(encoder),
            optimizer,
            ignore_index=None,
            jit_compile=args.jit_compile,
            steps_per_execution=args.steps_per_execution,
        )

    runtime.log(f"== 1. masked-LM pretraining: {pretrain_steps} steps of {args.batch_size} sentences ==")
    pre_args = runtime.stage_args(args, pretrain_steps, args.eval_interval, "pretrain")
    pre = runtime.train(pre_args, build_mlm, mlm_data, mlm_val, strategy)
    mlm_loss = pre.history.get("val_loss", [float("nan")])[-1]
    mlm_acc = pre.history.get("val_accuracy", [float("nan")])[-1]
    runtime.log(f"MLM dev loss {mlm_loss:.4f}, masked-token accuracy {mlm_acc:.4f}")

    # ---- 2. fine-tuning the classifier -------------------------------------- #
    n_train = len(y["train"])

    def ft_data(start_step):
        ds = tf.data.Dataset.from_tensor_slices((encoder_inputs(x["train"]), y["train"]))
        ds = ds.repeat().shuffle(n_train, seed=args.seed).batch(args.finetune_batch_size, drop_remainder=True)
        return runtime.skip(ds, start_step)

    def labelled(split):
        return tf.data.Dataset.from_tensor_slices((encoder_inputs(x[split]), y[split])).batch(256).cache()

    dev = labelled("dev")

    def build_classifier():
        with strategy.scope():
            classifier = models.bert_classifier(holder["encoder"], num_classes=2, pooling="cls")
            optimizer = runtime.adamw_decay_schedule(
                args,
                args.finetune_learning_rate,
                finetune_steps,
                max(1, finetune_steps // 10),
                min_ratio=1e-3,
            )
            return training.compile_for_classification(
                classifier,
                optimizer,
                jit_compile=args.jit_compile,
                steps_per_execution=args.steps_per_execution,
            )

    runtime.log(
        f"== 2. fine-tuning: {finetune_steps} steps of {args.finetune_batch_size} "
        f"({finetune_steps / per_epoch:.3g} epochs of {per_epoch} steps) =="
    )
    ft_args = runtime.stage_args(args, finetune_steps, min(per_epoch, finetune_steps), "finetune")
    ft = runtime.train(ft_args, build_classifier, ft_data, dev, strategy)
    classifier = ft.model
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
            classifier.evaluate(labelled("test"), verbose=0, return_dict=True)["accuracy"]
        )
    majority = max(np.mean(y["dev"]), 1 - np.mean(y["dev"]))
    runtime.log(
        f"SST-2 dev accuracy {dev_acc:.4f} (majority class {majority:.4f})"
        + (f", test accuracy {results['test_accuracy']:.4f}" if "test_accuracy" in results else "")
    )
    written = output_lib.save_trained(
        args, "bert", classifier, {"tokenizer": tokenizer}, results, labels=LABELS, log=runtime.log
    )
    results.update({f"{key}_path": path for key, path in written.items()})
    results["total_seconds"] = time.perf_counter() - t_start
    runtime.log(
        f"wall time: pretraining {pre.seconds:.1f} s, fine-tuning {ft.seconds:.1f} s, "
        f"total {results['total_seconds']:.1f} s"
    )
    runtime.write_results(args, results)
    results["model"] = classifier
    results["tokenizer"] = tokenizer
    return results


def evaluate_bert(trained, args):
    """`keras-tfm evaluate` for a BERT output: the accuracy on a '<label> <sentence>' file `--data`."""
    import numpy as np
    import tensorflow as tf

    from keras_tfm import training

    tokenizer = trained.tokenizers.get("tokenizer")
    if tokenizer is None:
        raise UsageError("--model", f"no {output_lib.TOKENIZER_FILES['tokenizer']} beside the model")
    if not os.path.isfile(args.data):
        raise UsageError("--data", f"expected a '<label> <sentence>' file; received {args.data!r}")
    sentences, labels = read_label_sentences(args.data)
    ids = tokenizer(tf.constant(sentences)).numpy().astype("int32")
    data = tf.data.Dataset.from_tensor_slices((encoder_inputs(ids), np.asarray(labels, "int32"))).batch(256)
    training.compile_for_classification(trained.model, "adam", jit_compile=False)
    metrics = trained.model.evaluate(data, verbose=0, return_dict=True)
    return {"accuracy": float(metrics["accuracy"]), "loss": float(metrics["loss"]), "sentences": len(labels)}
