"""Configuration fields and the errors of a bad configuration, shared by both packages.

`option` makes a dataclass field that carries its help text (and `choices`): `DataSpec` here and
`bytenet_tf.training.config.TrainConfig` declare each option once this way, and bytenet-train
generates its flags from those fields.

`ConfigError` is what the checks of a configuration and of its data files raise: a user's
mistake, whose message names the option and the fix. The binaries print it as a usage error;
any other exception is a bug and keeps its traceback.
"""

import dataclasses


def option(default, help_text, **metadata):
    """A dataclass field with its help text (and `choices`): the source of a binary's flag."""
    return dataclasses.field(default=default, metadata=dict(metadata, help=help_text))


class ConfigError(ValueError):
    """A bad option or data file; the message names the option (as a Python argument) and the fix."""


class MissingFileError(ConfigError, FileNotFoundError):
    """A file that an option names does not exist."""
