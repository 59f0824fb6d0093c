"""The installed package: a wheel built from this tree holds every file the packages read."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

from tests.conftest import PROJECT_ROOT, run_python

PACKAGES = ("bytenet_tf", "pipelines")


def package_files():
    """Every file under the packages, relative to the project root with `/` separators: the
    modules, and what the packages read at run time (today the fused kernel's C++ source)."""
    found = []
    for package in PACKAGES:
        for folder, subfolders, files in os.walk(os.path.join(PROJECT_ROOT, package)):
            subfolders[:] = [name for name in subfolders if name != "__pycache__"]
            found += [os.path.relpath(os.path.join(folder, name), PROJECT_ROOT).replace(os.sep, "/")
                      for name in files if not name.endswith(".pyc")]
    return sorted(found)


class WheelTest(unittest.TestCase):

    def test_wheel_holds_every_package_file_and_module(self):
        files = package_files()
        self.assertIn("bytenet_tf/ops/kernels/selu.cc", files)
        with tempfile.TemporaryDirectory() as out:
            # A copy of what the build reads, so that no build/ folder of an earlier build can
            # supply a file that setup.cfg fails to name.
            tree = os.path.join(out, "tree")
            os.makedirs(tree)
            for name in ("setup.cfg", "pyproject.toml", "README.md"):
                shutil.copy2(os.path.join(PROJECT_ROOT, name), tree)
            for package in PACKAGES:
                shutil.copytree(os.path.join(PROJECT_ROOT, package), os.path.join(tree, package),
                                ignore=shutil.ignore_patterns("__pycache__"))
            # No build isolation: setuptools and wheel come from the test extras, offline.
            result = subprocess.run(
                [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                 "--quiet", "--wheel-dir", out, tree],
                capture_output=True, text=True, timeout=300)
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            wheels = [name for name in os.listdir(out) if name.endswith(".whl")]
            self.assertEqual(len(wheels), 1, wheels)
            with zipfile.ZipFile(os.path.join(out, wheels[0])) as wheel:
                names = set(wheel.namelist())
        for path in files:
            self.assertIn(path, names, f"{path} is not in the wheel; a file that is not Python "
                          "must be named in setup.cfg's [options.package_data]")


if __name__ == "__main__":
    unittest.main()


class PackageBoundaryTest(unittest.TestCase):

    def test_pipelines_imports_nothing_of_bytenet_tf_and_builds_no_keras(self):
        # TensorFlow imports parts of Keras itself; pipelines must add none, nor bytenet_tf.
        code = ("import sys\n"
                "import tensorflow\n"
                "before = set(sys.modules)\n"
                "import pipelines.datasets, pipelines.preprocessing, pipelines.byte_codec\n"
                "print(sorted(m for m in set(sys.modules) - before\n"
                "             if m.split('.')[0] in ('bytenet_tf', 'keras')))\n")
        result = run_python(code)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        self.assertEqual(result.stdout.strip().splitlines()[-1], "[]")
