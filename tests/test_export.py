"""The SavedModel contract: strings in, strings out, in a process that imports only tensorflow."""

import json
import os
import subprocess
import sys

import tensorflow as tf

import bytenet_tf
from bytenet_tf import decoding, export, inference
from bytenet_tf.models.bytenet import ByteNet
from pipelines import byte_codec

# Runs in a fresh interpreter: only tensorflow is imported.
_LOAD_AND_TRANSLATE = r"""
import json, sys
import tensorflow as tf
translate = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
cases = {
    "single": [b"", b"\x00\x00nul", b"\xff\xfe\xc3(", b"x" * 10000],
    "empty_batch": [],
    "mixed_64": [(b"Guten Tag " * (i % 13)) + bytes([i]) for i in range(64)],
}
result = {}
for name, batch in cases.items():
    out = translate(source=tf.constant(batch, tf.string))["translation"]
    result[name] = {"shape": out.shape.as_list(), "dtype": out.dtype.name,
                    "outputs": [o.hex() for o in out.numpy()]}
result["modules"] = sorted(m for m in sys.modules if m.split(".")[0] in ("bytenet_tf", "pipelines", "tensorflow_text", "tensorflow_datasets"))
print(json.dumps(result))
"""


class ExportTest(tf.test.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.model = bytenet_tf.build_model("bytenet_selu", hidden_size=16, num_stacks=1,
                                           max_length=64, seed=0)
        cls.export_dir = os.path.join(tf.compat.v1.test.get_temp_dir(), "exports")
        cls.path = export.export_saved_model(cls.model, cls.export_dir)

    def test_layout_is_tf_serving_versions(self):
        self.assertEqual(self.path, os.path.join(self.export_dir, "1"))
        self.assertTrue(os.path.isfile(os.path.join(self.path, "saved_model.pb")))
        self.assertTrue(os.path.isdir(os.path.join(self.path, "variables")))
        self.assertEqual(inference.resolve_saved_model(self.export_dir), self.path)

    def test_contract_in_a_fresh_tensorflow_only_process(self):
        completed = subprocess.run([sys.executable, "-c", _LOAD_AND_TRANSLATE, self.path],
                                   capture_output=True, text=True, timeout=300)
        self.assertEqual(completed.returncode, 0, completed.stderr[-3000:])
        result = json.loads(completed.stdout.strip().splitlines()[-1])
        self.assertEqual(result["modules"], [])
        self.assertEqual(result["single"]["shape"], [4])
        self.assertEqual(result["single"]["dtype"], "string")
        self.assertEqual(result["empty_batch"]["shape"], [0])
        self.assertEqual(result["mixed_64"]["shape"], [64])
        # The served bytes equal in-process cached greedy decoding of the truncated input.
        sources = [b"", b"\x00\x00nul", b"\xff\xfe\xc3(", b"x" * 10000]
        ids = inference.source_ids(tf.constant(sources), self.model.max_length)
        expected = byte_codec.decode(decoding.greedy_decode(self.model, ids)).numpy()
        self.assertEqual([bytes.fromhex(h) for h in result["single"]["outputs"]], list(expected))

    def test_long_input_is_truncated_to_max_length(self):
        translate = tf.saved_model.load(self.path).signatures["serving_default"]
        long_input = bytes(range(256)) * 40
        out = translate(source=tf.constant([long_input, long_input[:63]]))["translation"].numpy()
        self.assertEqual(out[0], out[1])

    def test_saved_model_cli_lists_the_signature(self):
        # The tool's module through this interpreter: the suite may run as venv/bin/python
        # without the virtualenv's bin/ on PATH.
        completed = subprocess.run(
            [sys.executable, "-m", "tensorflow.python.tools.saved_model_cli", "show", "--dir",
             self.path, "--all"], capture_output=True, text=True, timeout=300)
        self.assertEqual(completed.returncode, 0, completed.stderr[-2000:])
        out = completed.stdout
        self.assertIn("signature_def['serving_default']", out)
        self.assertRegex(out, r"inputs\['source'\] tensor_info:\s+dtype: DT_STRING\s+shape: \(-1\)")
        self.assertRegex(out, r"outputs\['translation'\] tensor_info:\s+dtype: DT_STRING\s+shape: \(-1\)")

    def test_next_export_is_a_new_version_only_when_something_changed(self):
        base = os.path.join(self.get_temp_dir(), "versions")
        first = export.export_saved_model(self.model, base)
        # The same weights and options again (a rerun of a finished run): no new version.
        self.assertEqual(export.export_saved_model(self.model, base), first)
        self.assertEqual(sorted(os.listdir(base)), ["1"])
        second = export.export_saved_model(self.model, base, beam_size=2)
        self.assertEqual(second, os.path.join(base, "2"))
        self.assertEqual(inference.resolve_saved_model(base), second)
        with open(os.path.join(second, "assets.extra", "bytenet_config.json")) as f:
            self.assertEqual(json.load(f)["beam_size"], 2)
        changed = export.float32_copy(self.model)
        changed.set_weights([w + 1e-3 for w in self.model.get_weights()])
        self.assertEqual(export.export_saved_model(changed, base, beam_size=2),
                         os.path.join(base, "3"))

    def test_mixed_precision_model_exports_in_float32(self):
        model = bytenet_tf.build_model("bytenet_small", hidden_size=16, num_stacks=1,
                                       dtype="mixed_bfloat16", max_length=32, seed=0)
        path = export.export_saved_model(model, os.path.join(self.get_temp_dir(), "bf16"))
        loaded = tf.saved_model.load(path)
        stored = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
        weights = {name: dtype for name, dtype in stored.get_variable_to_dtype_map().items()
                   if name.startswith("model/")}
        self.assertNotEmpty(weights)
        self.assertEqual(set(weights.values()), {tf.float32})
        # Every floating op of the serving graph computes in float32: no bfloat16 anywhere.
        graph = loaded.signatures["serving_default"].graph.as_graph_def()
        functions = [graph.node] + [f.node_def for f in graph.library.function]
        dtypes = {attr.type for nodes in functions for node in nodes
                  for attr in node.attr.values() if attr.type}
        self.assertNotIn(tf.bfloat16.as_datatype_enum, dtypes)
        self.assertIn(tf.float32.as_datatype_enum, dtypes)
        # And it translates as the float32 copy of the same weights does.
        batch = tf.constant([b"Hallo", b"", b"\xff"])
        copy = export.float32_copy(model)
        expected = byte_codec.decode(decoding.greedy_decode(copy, inference.source_ids(batch, 32)))
        self.assertAllEqual(loaded.signatures["serving_default"](source=batch)["translation"],
                            expected)

    def test_bfloat16_export_stores_bfloat16_and_decodes_as_mixed_precision_does(self):
        model = bytenet_tf.build_model("bytenet_selu", hidden_size=32, num_stacks=1,
                                       max_length=48, seed=1)
        base = os.path.join(self.get_temp_dir(), "precision")
        float32 = export.export_saved_model(model, base, beam_size=2)
        path = export.export_saved_model(model, base, beam_size=2, precision="bfloat16")
        self.assertNotEqual(path, float32)  # another option, so another version
        with open(os.path.join(path, "assets.extra", "bytenet_config.json")) as f:
            self.assertEqual(json.load(f)["precision"], "bfloat16")
        stored = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
        kernels = {name: dtype for name, dtype in stored.get_variable_to_dtype_map().items()
                   if name.startswith("model/") and "kernel" in name}
        self.assertLen([n for n, dtype in kernels.items() if dtype == tf.bfloat16],
                       len(kernels) - 1)
        # The logits' projection alone stays float32, as in a mixed-precision model.
        self.assertEqual([n for n, dtype in kernels.items() if dtype != tf.bfloat16],
                         [n for n in kernels if "output_projection" in n])
        # The weights rounded once to bfloat16 compute what a mixed_bfloat16 model computes.
        config = model.get_config()
        config.update(dtype="mixed_bfloat16", ops_policy="reference")
        mixed = ByteNet.from_config(config)
        mixed.build()
        mixed.set_weights(model.get_weights())
        sources = [b"Ein Hund l\xc3\xa4uft.", b"", b"\xff\x00", b"Zwei Katzen" * 3]
        expected = inference.Translator(mixed, beam_size=2)(sources)
        loaded = tf.saved_model.load(path).signatures["serving_default"]
        self.assertEqual(inference.translate_list(loaded, sources), expected)
        with self.assertRaisesRegex(ValueError, "float32, bfloat16.*'float16'"):
            export.export_saved_model(model, base, precision="float16")

    def test_cpu_ops_export_translates_as_the_reference_ops_do(self):
        model = bytenet_tf.build_model("bytenet_selu", hidden_size=32, num_stacks=1,
                                       max_length=48, seed=2)
        base = os.path.join(self.get_temp_dir(), "ops")
        sources = [b"Ein Hund l\xc3\xa4uft.", b"", b"\xff\x00", b"Zwei Katzen" * 3,
                   b"x" * 200]
        for beam_size in (1, 3):
            paths = {policy: export.export_saved_model(model, base, beam_size=beam_size,
                                                       ops_policy=policy)
                     for policy in export.SERVING_OPS}
            self.assertNotEqual(paths["cpu"], paths["reference"])  # another option
            with open(os.path.join(paths["cpu"], "assets.extra", "bytenet_config.json")) as f:
                self.assertEqual(json.load(f)["ops_policy"], "cpu")
            outputs = {policy: inference.translate_list(
                tf.saved_model.load(path).signatures["serving_default"], sources)
                for policy, path in paths.items()}
            self.assertEqual(outputs["cpu"], outputs["reference"])
        with self.assertRaisesRegex(ValueError, "reference, cpu.*'cpu_fused'"):
            export.export_saved_model(model, base, ops_policy="cpu_fused")

    def test_xla_compiled_export_translates_like_graph_mode(self):
        path = export.export_saved_model(self.model, os.path.join(self.get_temp_dir(), "xla"),
                                         jit_compile=True)
        batch = tf.constant([b"Guten Tag", b"", b"\xff\x00"])
        compiled = tf.saved_model.load(path).signatures["serving_default"](source=batch)
        plain = tf.saved_model.load(self.path).signatures["serving_default"](source=batch)
        self.assertAllEqual(compiled["translation"], plain["translation"])

    def test_missing_saved_model_names_the_path(self):
        with self.assertRaisesRegex(FileNotFoundError, "No SavedModel at /nowhere"):
            inference.resolve_saved_model("/nowhere")
