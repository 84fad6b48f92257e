"""Serving client run in a fresh subprocess by tests/test_export.py.

    python tests/serving_client.py SPEC.json RESULT.json

Importing `keras`, `tf_keras` or `keras_tfm` raises ImportError in this
process (their `sys.modules` entries are set to None before TensorFlow is
imported), so
everything below proves that the exported SavedModels need TensorFlow only.

For every model in the spec it
  * loads the version with `tf.saved_model.load` and calls the listed
    signatures ("tf2"),
  * loads it with the TF1 loader `tf.compat.v1.saved_model.loader.load(sess,
    ["serve"], path)` and runs the same requests through `session.run` by the
    input/output tensor names of the MetaGraphDef's SignatureDefs, as TF
    Serving does ("tf1"),
  * sends the malformed requests ("bad"), recording the exception class and
    message (they must fail cleanly: the parent process applies a timeout),
  * replays the warmup records of assets.extra through the TF2 signatures.

Last, for each path of the spec's optional "saved_model_cli" list, it runs
`saved_model_cli show --all --dir PATH` through the `main` that TensorFlow's
`saved_model_cli` console script calls (in this process: one TensorFlow
start-up less than running the script), recording its exit code and output.

Spec: {"models": [{"path": ..., "calls": [{"signature": ..., "inputs": {...},
"dtypes": {name: dtype}}], "bad": [same], "tf1_calls": [indices of the calls
the TF1 loader repeats; default all]}], "saved_model_cli": [path, ...]}.
Inputs are JSON lists/scalars; dtypes default to the signature's.
"""

import contextlib
import io
import json
import sys

BLOCKED = ("keras", "tf_keras", "keras_tfm")
# `None` in sys.modules makes `import keras` raise ImportError and makes
# `importlib.util.find_spec("keras")` return None, i.e. Keras looks *not
# installed* to TensorFlow (whose import probes for it with find_spec; a
# meta-path finder that raises would break `import tensorflow` itself).
for _name in BLOCKED:
    sys.modules[_name] = None

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def _jsonable(value):
    value = np.asarray(value)
    if value.dtype == object or value.dtype.kind == "S":
        return np.vectorize(
            lambda b: b.decode("utf-8", "replace") if isinstance(b, bytes) else str(b), otypes=[object]
        )(value).tolist()
    return value.tolist()


def _array(value, dtype):
    dtype = tf.as_dtype(dtype)
    if dtype == tf.string:
        return np.array(value, dtype=object)
    return np.array(value, dtype=dtype.as_numpy_dtype)


def _tf2_call(loaded, call):
    fn = loaded.signatures[call["signature"]]
    specs = fn.structured_input_signature[1]
    dtypes = call.get("dtypes", {})
    feed = {k: tf.constant(_array(v, dtypes.get(k, specs[k].dtype))) for k, v in call["inputs"].items()}
    return {k: _jsonable(v.numpy()) for k, v in fn(**feed).items()}


def run_tf1(path, calls):
    results = []
    with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph) as sess:
        meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], path)
        for call in calls:
            signature = meta.signature_def[call["signature"]]
            feed = {}
            for key, value in call["inputs"].items():
                info = signature.inputs[key]
                feed[info.name] = _array(value, tf.as_dtype(info.dtype))
            fetches = {key: info.name for key, info in signature.outputs.items()}
            out = sess.run(fetches, feed_dict=feed)
            results.append({k: _jsonable(v) for k, v in out.items()})
        signatures = {
            name: {"inputs": sorted(s.inputs), "outputs": sorted(s.outputs)}
            for name, s in meta.signature_def.items()
        }
    return results, signatures


def run_bad(loaded, calls):
    results = []
    for call in calls:
        try:
            _tf2_call(loaded, call)
        except Exception as error:  # noqa: BLE001 - recorded for the test
            results.append({"error": type(error).__name__, "message": str(error)[:2000]})
        else:
            results.append({"error": None, "message": ""})
    return results


def run_warmup(loaded, path):
    import os

    file = os.path.join(path, "assets.extra", "tf_serving_warmup_requests")
    if not os.path.exists(file):
        return None
    try:  # the official protos when installed; the test checks the bytes otherwise
        from tensorflow_serving.apis import prediction_log_pb2
    except ImportError:
        prediction_log_pb2 = None
    done = []
    for record in tf.data.TFRecordDataset(file):
        if prediction_log_pb2 is None:
            done.append({"parsed_with": None})
            continue
        log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
        request = log.predict_log.request
        fn = loaded.signatures[request.model_spec.signature_name]
        feed = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
        out = fn(**{k: tf.constant(v) for k, v in feed.items()})
        done.append(
            {
                "parsed_with": "tensorflow_serving",
                "signature": request.model_spec.signature_name,
                "outputs": sorted(out),
            }
        )
    return done


def show_all(path):
    """{"code", "stdout"} of `saved_model_cli show --all --dir path` (the console script's main)."""
    from tensorflow.python.tools import saved_model_cli

    argv, sys.argv = sys.argv, ["saved_model_cli", "show", "--all", "--dir", path]
    out, code = io.StringIO(), 0
    try:
        with contextlib.redirect_stdout(out):
            saved_model_cli.main()  # absl's app.run: exits through SystemExit
    except SystemExit as exit_info:
        code = exit_info.code or 0
    finally:
        sys.argv = argv
    return {"code": code, "stdout": out.getvalue()}


def main(spec_path, result_path):
    with open(spec_path) as f:
        spec = json.load(f)
    results = []
    for model in spec["models"]:
        path = model["path"]
        loaded = tf.saved_model.load(path)
        entry = {"path": path, "signatures": sorted(loaded.signatures)}
        entry["tf2"] = [_tf2_call(loaded, call) for call in model.get("calls", [])]
        entry["bad"] = run_bad(loaded, model.get("bad", []))
        entry["warmup"] = run_warmup(loaded, path)
        if model.get("tf1", True):
            calls = model.get("calls", [])
            calls = [calls[i] for i in model.get("tf1_calls", range(len(calls)))]
            entry["tf1"], entry["tf1_signatures"] = run_tf1(path, calls)
        results.append(entry)
    shown = [show_all(path) for path in spec.get("saved_model_cli", [])]
    blocked_loaded = sorted(
        m for m, mod in sys.modules.items() if m.split(".")[0] in BLOCKED and mod is not None
    )
    with open(result_path, "w") as f:
        json.dump({"models": results, "saved_model_cli": shown, "blocked_modules_loaded": blocked_loaded}, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
