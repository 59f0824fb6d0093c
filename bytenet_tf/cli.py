"""What the three binaries share: flags made from configuration fields, `--help`, and errors.

- `define_flags(fields)`: one absl flag per dataclass field made with `pipelines.options.option`
  (its name, type, choices, help and default written once, in the field).
- `flag_message(message, names)`: a library error in flag terms (`batch_size` -> --batch_size).
- `require_positive(*names)`: a `ConfigError` for an integer flag below 1.
- `define_decoding_flags(module_name)`: `--batch_size`, `--batch_bytes`, `--concurrent_batches`
  and `--progress`, how bytenet-evaluate and bytenet-translate feed a SavedModel;
  `start_decoding()` checks them and shares the cores out, and
  `decode_lines(translate_fn, sources)` decodes with them.
- `run(main, module_name, binary)`: `absl.app.run(main)`, with two things absl does not do on its
  own. `--help` shows the module's usage and lists its flags: absl shows only those of the file
  that was started, and a console script (`bytenet-train`) is not the module that defines them
  (absl's `--help` exits with status 1, as it always does). And a
  `pipelines.options.ConfigError` (a user's mistake) ends the process with exit status 1 and
  its message in flag terms; any other exception is a bug and keeps its traceback.
"""

import re
import sys

from absl import app, flags, logging

from bytenet_tf import inference
from pipelines.options import ConfigError

FLAGS = flags.FLAGS
_DEFINERS = {str: flags.DEFINE_string, int: flags.DEFINE_integer, float: flags.DEFINE_float,
             bool: flags.DEFINE_bool}


def _module(module_name):
    # absl files the flags of the started file (`python -m module`) under its path.
    return sys.argv[0] if module_name == "__main__" else module_name


def define_flags(fields, module_name, help_text=None):
    """Defines one absl flag per dataclass field, once per process, as flags of `module_name`.

    Args:
        fields: `dataclasses.Field`s made with `pipelines.options.option`.
        module_name: the binary's module (`__name__`), whose `--help` lists the flags.
        help_text: optional callable, field -> help string (default: the field's own help).
    """
    for field in fields:
        if field.name in FLAGS:
            continue
        text = help_text(field) if help_text else field.metadata["help"]
        choices = field.metadata.get("choices")
        if choices:
            flags.DEFINE_enum(field.name, field.default, list(choices), text,
                              module_name=_module(module_name))
        else:
            _DEFINERS[field.type](field.name, field.default, text,
                                  module_name=_module(module_name))


def flag_message(message, names):
    """`message` with the argument names in `names` as flags: `batch_size` and batch_size=0
    become --batch_size and --batch_size=0; other names stay as they are."""
    def as_flag(match):
        name = match.group(1) or match.group(2)
        if name not in names:
            return match.group(0)
        return f"--{name}" if match.group(1) else f"--{name}="

    return re.sub(r"`(\w+)`|(?<![\w-])(\w+)=", as_flag, message)


def require_positive(*names):
    """Raises `ConfigError` naming the first of the integer flags `names` below 1, and its value."""
    for name in names:
        if FLAGS[name].value < 1:
            raise ConfigError(f"`{name}` must be >= 1. Received: {name}={FLAGS[name].value}")


def define_decoding_flags(module_name):
    """Defines `--batch_size`, `--batch_bytes`, `--concurrent_batches` and `--progress` as flags
    of `module_name`."""
    module = _module(module_name)
    flags.DEFINE_integer("batch_size", inference.DEFAULT_BATCH_SIZE, "Sentences per batch.",
                         module_name=module)
    flags.DEFINE_integer("batch_bytes", inference.DEFAULT_BATCH_BYTES,
                         "Padded source bytes per batch: its sentences times its longest, plus "
                         "one each. Batches of long sentences hold fewer of them, so that the "
                         "batches in flight finish together. A longer sentence goes alone.",
                         module_name=module)
    flags.DEFINE_integer("concurrent_batches", inference.DEFAULT_CONCURRENT_BATCHES,
                         "Batches decoding at once, in threads (1: one after another); each "
                         "gets its share of the CPU's cores as TensorFlow's intra-op threads. "
                         "The batches and the translations are the same whatever the value.",
                         module_name=module)
    flags.DEFINE_bool("progress", True, "Show a progress bar on stderr.", module_name=module)


def decode_lines(translate_fn, sources):
    """`inference.translate_batches` of `sources` with the flags of `define_decoding_flags`."""
    return inference.translate_batches(translate_fn, sources, FLAGS.batch_size,
                                       progress=FLAGS.progress,
                                       concurrent_batches=FLAGS.concurrent_batches,
                                       batch_bytes=FLAGS.batch_bytes)


def start_decoding():
    """Checks the decoding flags and splits the cores between the batches in flight; call it
    before TensorFlow runs its first op. Returns the intra-op threads (`inference.share_cores`)."""
    require_positive("batch_size", "batch_bytes", "concurrent_batches")
    return inference.share_cores(FLAGS.concurrent_batches)


def run(main, module_name, binary):
    """Runs `main` under absl, listing `module_name`'s flags in `--help`; a `ConfigError`
    becomes `<binary>: error: <message in flag terms>` on stderr and exit status 1."""
    main_module = sys.modules["__main__"]
    if not main_module.__doc__:  # a console script's wrapper: show the binary's own usage
        main_module.__doc__ = sys.modules[module_name].__doc__
    key_flags = FLAGS.get_key_flags_for_module(_module(module_name))
    for flag in key_flags:
        FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    names = {flag.name for flag in key_flags}

    def guarded(argv):
        try:
            return main(argv)
        except ConfigError as error:
            message = flag_message(str(error), names)
            logging.error("%s", message)
            print(f"{binary}: error: {message}", file=sys.stderr)
            sys.exit(1)

    app.run(guarded)
