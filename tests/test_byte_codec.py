"""The byte codec: reserved ids and exact round trips on any byte string."""

import tensorflow as tf

from pipelines import byte_codec

CASES = [b"", b"\x00", b"a\x00b\x00", b"\xff\xfe\x80", b"\xc3(", "Stra\u00dfe".encode(),
         "\U0001F600 \U00010348".encode(), bytes(range(256)), b"line\xe2\x80\xa8sep"]


class ByteCodecTest(tf.test.TestCase):

    def test_special_ids_are_distinct_and_below_bytes(self):
        special = {byte_codec.PAD_ID, byte_codec.BOS_ID, byte_codec.EOS_ID}
        self.assertLen(special, 3)
        self.assertEqual(byte_codec.VOCAB_SIZE, 256 + byte_codec.BYTE_OFFSET)
        self.assertLess(max(special), byte_codec.BYTE_OFFSET)

    def test_nul_byte_is_not_padding(self):
        self.assertNotEqual(byte_codec.encode_python(b"\x00")[0], byte_codec.PAD_ID)

    def test_batch_round_trip(self):
        ids = byte_codec.encode(tf.constant(CASES))
        decoded = byte_codec.decode(ids.to_tensor(byte_codec.PAD_ID)).numpy().tolist()
        self.assertEqual(decoded, CASES)

    def test_scalar_round_trip(self):
        for case in CASES:
            ids = byte_codec.encode(tf.constant(case))
            self.assertEqual(ids.numpy().tolist(), byte_codec.encode_python(case))
            self.assertEqual(byte_codec.decode(ids).numpy(), case)

    def test_ids_are_in_vocabulary(self):
        ids = byte_codec.encode(tf.constant([bytes(range(256))])).flat_values.numpy()
        self.assertEqual(ids.min(), byte_codec.BYTE_OFFSET)
        self.assertEqual(ids.max(), byte_codec.VOCAB_SIZE - 1)

    def test_decode_stops_at_eos_and_drops_special_ids(self):
        a, b = byte_codec.encode_python(b"ab")
        ids = tf.constant([[byte_codec.BOS_ID, a, b, byte_codec.EOS_ID, a],
                           [a, byte_codec.PAD_ID, b, byte_codec.PAD_ID, byte_codec.PAD_ID]])
        self.assertEqual(byte_codec.decode(ids).numpy().tolist(), [b"ab", b"ab"])

    def test_works_inside_tf_data(self):
        dataset = tf.data.Dataset.from_tensor_slices(tf.constant(CASES)).map(byte_codec.encode)
        decoded = [byte_codec.decode(ids).numpy() for ids in dataset]
        self.assertEqual(decoded, CASES)
