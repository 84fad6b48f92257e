"""TF Serving warmup records, written without the `tensorflow-serving-api` package.

TF Serving replays `assets.extra/tf_serving_warmup_requests` (a TFRecord file
of `tensorflow.serving.PredictionLog` protos) when it loads a model version,
so the first real request does not pay for graph/XLA compilation.

The `PredictionLog` messages are encoded here directly in the protobuf wire
format (only the few fields a warmup record needs), with the `TensorProto`s
serialised by TensorFlow itself. The bytes are identical to what
`tensorflow_serving.apis.prediction_log_pb2` produces:

    PredictionLog  { predict_log  = 6 : PredictLog }
    PredictLog     { request      = 1 : PredictRequest }
    PredictRequest { model_spec   = 1 : ModelSpec,
                     inputs       = 2 : map<string, TensorProto> }
    ModelSpec      { name = 1 : string, signature_name = 3 : string }

`decode_prediction_log` reads such a record back (tests, tools) and also
needs no extra package.
"""

import os

import numpy as np
import tensorflow as tf

from keras_tfm.protobuf_wire import length_delimited, message_fields

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")


def encode_prediction_log(model_name, signature_name, inputs):
    """Serialised `PredictionLog` holding one `PredictRequest`.

    Args:
        model_name: the served model's name (`ModelSpec.name`).
        signature_name: the signature to call.
        inputs: dict input name -> value (anything `tf.make_tensor_proto`
            accepts: numpy arrays, lists, Python scalars of the right dtype).

    Returns:
        bytes.
    """
    spec = length_delimited(1, model_name) + length_delimited(3, signature_name)
    request = length_delimited(1, spec)
    for key in sorted(inputs):
        tensor = tf.make_tensor_proto(inputs[key]).SerializeToString()
        request += length_delimited(2, length_delimited(1, key) + length_delimited(2, tensor))
    return length_delimited(6, length_delimited(1, request))


def _fields(data):
    """`(field number, value)` of one message of a warmup record."""
    return ((number, value) for number, _, value in message_fields(data, "a warmup record"))


def decode_prediction_log(data):
    """Inverse of `encode_prediction_log`: `(model_name, signature_name,
    {input name: numpy array})`."""
    model_name = signature_name = ""
    inputs = {}
    for number, log in _fields(data):
        if number != 6:
            continue
        for n1, request in _fields(log):
            if n1 != 1:
                continue
            for n2, value in _fields(request):
                if n2 == 1:
                    for n3, v in _fields(value):
                        if n3 == 1:
                            model_name = v.decode("utf-8")
                        elif n3 == 3:
                            signature_name = v.decode("utf-8")
                elif n2 == 2:
                    entry = dict(_fields(value))
                    proto = tf.make_tensor_proto(0)
                    proto.ParseFromString(entry.get(2, b""))
                    inputs[entry[1].decode("utf-8")] = tf.make_ndarray(proto)
    return model_name, signature_name, inputs


def write_warmup_requests(saved_model_dir, model_name, requests):
    """Writes `assets.extra/tf_serving_warmup_requests` under `saved_model_dir`.

    Args:
        requests: list of `(signature_name, inputs dict)`.

    Returns:
        The file path.
    """
    path = os.path.join(saved_model_dir, WARMUP_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for signature_name, inputs in requests:
            writer.write(encode_prediction_log(model_name, signature_name, inputs))
    return path


def read_warmup_requests(saved_model_dir: str | os.PathLike) -> list[tuple[str, str, dict[str, np.ndarray]]]:
    """Reads the warmup records back: list of `(model_name, signature_name, inputs)`."""
    path = os.path.join(saved_model_dir, WARMUP_FILE)
    return [decode_prediction_log(r.numpy()) for r in tf.data.TFRecordDataset(path)]
