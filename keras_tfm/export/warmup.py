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

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")


def _varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number, payload):
    """A length-delimited field (wire type 2)."""
    if isinstance(payload, str):
        payload = payload.encode("utf-8")
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


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
    spec = _field(1, model_name) + _field(3, signature_name)
    request = _field(1, spec)
    for key in sorted(inputs):
        tensor = tf.make_tensor_proto(inputs[key]).SerializeToString()
        request += _field(2, _field(1, key) + _field(2, tensor))
    return _field(6, _field(1, request))


def _read_varint(data, pos):
    shift = result = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data):
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 2:
            length, pos = _read_varint(data, pos)
            yield number, data[pos : pos + length]
            pos += length
        elif wire == 0:
            value, pos = _read_varint(data, pos)
            yield number, value
        else:  # not produced by `encode_prediction_log`
            raise ValueError(f"Unsupported protobuf wire type {wire} in a warmup record.")


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
