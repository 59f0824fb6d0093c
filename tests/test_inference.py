"""`inference.translate_batches`: length-sorted batches longest first, input order, batches
decoding at once."""

import os
import random
import threading

import tensorflow as tf

import bytenet_tf
from bytenet_tf import export, inference


def _random_sources(count, seed):
    """Byte strings of 0-40 random bytes (NUL, newline and invalid UTF-8 included)."""
    rng = random.Random(seed)
    return [bytes(rng.randrange(256) for _ in range(rng.randrange(41))) for _ in range(count)]


class _Recorder:
    """A translate function that answers each source with its batch's number and its reversal,
    and records the batches it saw and how many calls ran at once."""

    def __init__(self, barrier=None):
        self.barrier = barrier
        self.batches, self.active, self.most_active = [], 0, 0
        self.lock = threading.Lock()

    def __call__(self, sources):
        with self.lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
            number = len(self.batches)
            self.batches.append(list(sources))
        try:
            if self.barrier is not None:
                self.barrier.wait()
            return [b"%d:" % number + source[::-1] for source in sources]
        finally:
            with self.lock:
                self.active -= 1


class TranslateBatchesTest(tf.test.TestCase):

    def test_every_source_answered_in_input_order_from_length_sorted_batches(self):
        sources = _random_sources(23, seed=0)
        for concurrent in (1, 2, 5, 30):
            recorder = _Recorder()
            outputs = inference.translate_batches(recorder, sources, batch_size=4,
                                                  concurrent_batches=concurrent,
                                                  batch_bytes=None)
            self.assertLen(outputs, len(sources))
            for source, output in zip(sources, outputs):
                self.assertEqual(output.split(b":", 1)[1], source[::-1])
            # The batches are cut from the stable length order, longest first, whatever the
            # concurrency, and each source is answered by the call that held its batch.
            order = sorted(range(len(sources)), key=lambda i: -len(sources[i]))
            expected = [order[start:start + 4] for start in range(0, len(sources), 4)]
            self.assertCountEqual(recorder.batches,
                                  [[sources[i] for i in batch] for batch in expected])
            for batch in expected:
                number = recorder.batches.index([sources[i] for i in batch])
                for i in batch:
                    self.assertTrue(outputs[i].startswith(b"%d:" % number), (i, number))

    def test_batches_hold_at_most_their_bytes_longest_first(self):
        rng = random.Random(4)
        lengths = [rng.choice([0, 1, 5, 30, 31, 99, 100, 400]) for _ in range(300)]
        for batch_size, batch_bytes in ((256, 1000), (8, 1000), (256, 64), (3, None)):
            batches = inference.cut_batches(lengths, batch_size, batch_bytes)
            flat = [int(i) for batch in batches for i in batch]
            self.assertCountEqual(flat, range(len(lengths)))  # every source once
            # Longest first, and ties in input order.
            self.assertEqual(flat, sorted(range(len(lengths)), key=lambda i: -lengths[i]))
            for batch, following in zip(batches, batches[1:] + [[]]):
                padded = len(batch) * (lengths[batch[0]] + 1)
                self.assertLessEqual(len(batch), batch_size)
                if batch_bytes is not None and len(batch) > 1:
                    self.assertLessEqual(padded, batch_bytes)
                # Each batch is as full as its limits allow: the next source would break one.
                if len(following):
                    full = len(batch) == batch_size or (
                        batch_bytes is not None
                        and (len(batch) + 1) * (lengths[batch[0]] + 1) > batch_bytes)
                    self.assertTrue(full, (len(batch), lengths[batch[0]]))
        # A source longer than the budget goes alone; the others still share batches.
        batches = inference.cut_batches([500, 3, 3, 3], 256, 16)
        self.assertEqual([list(batch) for batch in batches], [[0], [1, 2, 3]])
        with self.assertRaisesRegex(ValueError, r"Received: batch_bytes=0"):
            inference.cut_batches([1], 4, 0)

    def test_two_batches_decode_at_once_and_one_means_one_at_a_time(self):
        sources = _random_sources(16, seed=1)
        # Each call waits until a second call has started: one batch at a time would time out.
        both = _Recorder(threading.Barrier(2, timeout=30))
        inference.translate_batches(both, sources, batch_size=4, concurrent_batches=2)
        self.assertEqual(both.most_active, 2)
        one = _Recorder()
        inference.translate_batches(one, sources, batch_size=4, concurrent_batches=1)
        self.assertEqual(one.most_active, 1)
        self.assertLen(one.batches, 4)

    def test_empty_input_and_an_empty_source(self):
        self.assertEqual(inference.translate_batches(_Recorder(), []), [])
        # The longer source is the first batch.
        self.assertEqual(inference.translate_batches(_Recorder(), [b"", b"ab"], batch_size=1),
                         [b"1:", b"0:ba"])

    def test_a_failing_batch_raises_its_error(self):
        def translate(sources):
            if any(len(source) > 30 for source in sources):
                raise RuntimeError("this batch failed")
            return sources

        with self.assertRaisesRegex(RuntimeError, "this batch failed"):
            inference.translate_batches(translate, _random_sources(40, seed=2), batch_size=3,
                                        concurrent_batches=2)

    def test_bad_sizes_name_the_value(self):
        with self.assertRaisesRegex(ValueError, r"concurrent_batches.*Received: "
                                                r"concurrent_batches=0"):
            inference.translate_batches(_Recorder(), [b"a"], concurrent_batches=0)
        with self.assertRaisesRegex(ValueError, r"Received: batch_size=0"):
            inference.translate_batches(_Recorder(), [b"a"], batch_size=0)

    def test_batches_in_flight_split_the_cores(self):
        self.assertEqual(inference.threads_per_batch(2, cores=2), 1)
        self.assertEqual(inference.threads_per_batch(1, cores=2), 2)
        self.assertEqual(inference.threads_per_batch(3, cores=2), 1)  # never below one
        self.assertEqual(inference.threads_per_batch(2, cores=16), 8)
        self.assertEqual(inference.threads_per_batch(3, cores=16), 5)
        self.assertEqual(inference.threads_per_batch(1), inference.available_cores())
        with self.assertRaisesRegex(ValueError, r"Received: concurrent_batches=0"):
            inference.threads_per_batch(0)

    def test_sharing_the_cores_after_tensorflow_started_keeps_its_threads(self):
        tf.constant(1.0) + 1.0  # TensorFlow has started in this process
        before = tf.config.threading.get_intra_op_parallelism_threads()
        cores = inference.available_cores()
        other = [n for n in (1, cores + 1) if inference.threads_per_batch(n) != before]
        if not other:
            self.skipTest("one core, already one thread per op: no other count to ask for")
        with self.assertLogs(level="WARNING") as logs:
            threads = inference.share_cores(other[0])
        self.assertEqual(threads, before)
        self.assertIn("keeps its", "".join(logs.output))

    def test_a_saved_model_translates_the_same_with_batches_at_once(self):
        model = bytenet_tf.build_model("bytenet_selu", hidden_size=16, num_stacks=1,
                                       max_length=48, seed=3)
        base = os.path.join(self.get_temp_dir(), "exports")
        sources = _random_sources(40, seed=3)
        for beam_size in (1, 2):
            path = export.export_saved_model(model, base, beam_size=beam_size)
            signature, _ = inference.load_saved_model(path)
            translate = inference.as_translate_fn(signature)
            one = inference.translate_batches(translate, sources, batch_size=6,
                                              concurrent_batches=1)
            both = inference.translate_batches(translate, sources, batch_size=6,
                                               concurrent_batches=2)
            self.assertEqual(both, one)
            # Batches cut by bytes instead (1 to 6 sentences each) translate the same.
            by_bytes = inference.translate_batches(translate, sources, batch_size=6,
                                                   batch_bytes=60, concurrent_batches=2)
            self.assertEqual(by_bytes, one)


if __name__ == "__main__":
    tf.test.main()
