"""Shared test helpers: the real data beside the project, and small batches of it."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

from pipelines import byte_codec  # noqa: E402

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEEN = os.path.join(os.path.dirname(PROJECT_ROOT), "shared", "data", "deen")


def deen_path(name):
    """Path of `../shared/data/deen/<name>`; skips the test when the folder is absent."""
    path = os.path.join(DEEN, name)
    if not os.path.exists(path):
        pytest.skip(f"needs ../shared/data/deen/{name} (the shared data folder beside the "
                    "project), which is absent")
    return path


def read_lines(name, count, max_bytes=None):
    """The first `count` lines of a shared data file, as bytes, split on b"\\n" only."""
    with open(deen_path(name), "rb") as f:
        lines = f.read().split(b"\n")[:count]
    return [line[:max_bytes] if max_bytes else line for line in lines]


def pad_batch(rows):
    """Pads lists of ids with PAD_ID into a rectangular list of lists."""
    width = max(len(row) for row in rows)
    return [row + [byte_codec.PAD_ID] * (width - len(row)) for row in rows]


def real_batch(count=4, max_bytes=40):
    """A batch of real newstest2013 pairs as `(source, target, labels)` int32 lists."""
    sources = read_lines("fixture-tiny.de", count, max_bytes)
    targets = read_lines("fixture-tiny.en", count, max_bytes)
    source = pad_batch([byte_codec.encode_python(s) + [byte_codec.EOS_ID] for s in sources])
    target = pad_batch([[byte_codec.BOS_ID] + byte_codec.encode_python(t) for t in targets])
    labels = pad_batch([byte_codec.encode_python(t) + [byte_codec.EOS_ID] for t in targets])
    return source, target, labels


def pytest_collection_modifyitems(config, items):
    # tf.test.TestCase.test_session is a TF helper, not a test; pytest would report it skipped.
    items[:] = [item for item in items if item.name != "test_session"]
