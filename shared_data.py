"""Where the shared German-English data lives for tests, benchmarks and experiments.

`../shared/data/deen` beside the project root (see its SOURCES.md). Not part of the installed
package: only this repository's own scripts read it.
"""

import os

ROOT = os.path.dirname(os.path.abspath(__file__))
DEEN = os.path.join(os.path.dirname(ROOT), "shared", "data", "deen")


def deen(name):
    """Path of `../shared/data/deen/<name>`, or a `FileNotFoundError` that says where to put it."""
    path = os.path.join(DEEN, name)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing: this script reads the shared German-English "
                                "data from ../shared/data/deen beside the project.")
    return path
