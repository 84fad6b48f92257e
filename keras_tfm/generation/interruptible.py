"""Compiled generation calls that Ctrl-C interrupts.

A compiled (`tf.function`) decoding loop runs as one TensorFlow call: Python
handles a SIGINT only when that call returns, so Ctrl-C on a long generation
would wait for the whole loop. `call(fn, *args)` runs `fn` in a worker thread
(under the caller's device scope) while the calling thread waits in short
slices: Ctrl-C raises `KeyboardInterrupt` in the caller within
`POLL_SECONDS`. The abandoned call cannot be cancelled inside TensorFlow; it
runs to its end in the background and its result is dropped (generation
calls are bounded, `base.MAX_NEW_TOKENS`, so it ends).

Exit. A process must not finalize Python while a worker is inside
TensorFlow: the worker, returning, would be torn down through TensorFlow's
C++ frames and abort the process. So when the interpreter exits while an
abandoned call still runs, an `atexit` hook flushes the standard streams
and logging and ends the process at once, with the status Python would
give: killed by SIGINT after an unhandled `KeyboardInterrupt` (as Python
itself does), 1 after another unhandled exception, else 0 (a `sys.exit`
code is not visible to the hook). The `atexit` callbacks registered before
this module's import do not run in that case.
"""

import atexit
import logging
import os
import queue
import signal
import sys
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
_ABANDONED = set()  # events of the calls whose caller was interrupted, while they run


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
            _ABANDONED.discard(done)
            _IDLE.append(worker)

    worker.jobs.put(job)
    try:
        while not done.wait(POLL_SECONDS):
            pass
    except KeyboardInterrupt:
        if not done.is_set():
            _ABANDONED.add(done)
        raise
    if "error" in box:
        raise box["error"]
    return box["result"]


@atexit.register
def _exit_while_abandoned():
    """Ends the process now if an abandoned call still runs (see the module docstring)."""
    if not any(not event.is_set() for event in list(_ABANDONED)):
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed or broken stream: nothing more to save
            pass
    logging.shutdown()
    last = getattr(sys, "last_value", None)  # set for an unhandled exception
    if isinstance(last, KeyboardInterrupt):
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(0 if last is None else 1)
