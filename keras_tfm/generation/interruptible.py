"""Compiled generation calls that Ctrl-C interrupts.

A compiled (`tf.function`) decoding loop runs as one TensorFlow call: Python
handles a SIGINT only when that call returns, so Ctrl-C on a long generation
would wait for the whole loop. `call(fn, *args)` runs `fn` in a worker thread
(under the caller's device scope) while the calling thread waits in short
slices: Ctrl-C raises `KeyboardInterrupt` in the caller within
`POLL_SECONDS`. The abandoned call cannot be cancelled inside TensorFlow; it
runs to its end in the background (a daemon thread: it does not delay the
exit of the process) and its result is dropped. Generation calls are bounded
(`base.MAX_NEW_TOKENS`), so such a call ends.
"""

import queue
import threading

import tensorflow as tf

#: Longest wait between two checks for a pending Ctrl-C, in seconds.
POLL_SECONDS = 0.1


def _device_name():
    """The caller's `tf.device` scope (thread-local, so the worker re-enters it)."""
    from tensorflow.python.eager import context

    return context.context().device_name


class _Worker(threading.Thread):
    """A daemon thread that runs one job at a time; kept for reuse (a fresh
    thread per call would set up TensorFlow's per-thread state every time)."""

    def __init__(self):
        super().__init__(name="keras_tfm-generation", daemon=True)
        self.jobs = queue.SimpleQueue()
        self.start()

    def run(self):
        while True:
            job = self.jobs.get()
            job()


_IDLE = []  # idle workers (a list: append / pop are atomic)


def call(fn, *args):
    """`fn(*args)` in a worker thread; returns its result or raises its exception.

    Raises:
        KeyboardInterrupt: Ctrl-C (SIGINT) while waiting; the worker's result
            is dropped (and the worker rejoins the idle ones when done).
    """
    device = _device_name()
    box = {}
    done = threading.Event()
    try:
        worker = _IDLE.pop()
    except IndexError:
        worker = _Worker()

    def job():
        try:
            if device:
                with tf.device(device):
                    box["result"] = fn(*args)
            else:
                box["result"] = fn(*args)
        except BaseException as error:  # re-raised in the caller
            box["error"] = error
        finally:
            done.set()
            _IDLE.append(worker)

    worker.jobs.put(job)
    while not done.wait(POLL_SECONDS):
        pass
    if "error" in box:
        raise box["error"]
    return box["result"]
