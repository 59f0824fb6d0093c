"""Loading an exported translator and running it on lists of byte strings.

Shared by bytenet-translate and bytenet-evaluate; needs only tensorflow and the SavedModel.
"""

import tensorflow as tf

from bytenet_tf.export import resolve_saved_model


def load_translate_fn(saved_model):
    """Returns `(translate_fn, version_dir)`; `translate_fn` maps a list of bytes to a list of bytes.

    `saved_model` may be a version directory or an export base (the newest version is used).
    """
    path = resolve_saved_model(saved_model)
    signature = tf.saved_model.load(path).signatures["serving_default"]

    def translate(sources):
        outputs = signature(source=tf.constant(sources, tf.string))["translation"]
        return list(outputs.numpy())

    return translate, path


def read_lines(stream):
    """Reads a binary stream as lines split on b"\\n" only (a final newline ends the last line)."""
    data = stream.read()
    if not data:
        return []
    lines = data.split(b"\n")
    return lines[:-1] if data.endswith(b"\n") else lines


def one_line(translation):
    """A translation made safe for line-aligned output: newline bytes become spaces."""
    return translation.replace(b"\r", b" ").replace(b"\n", b" ")
