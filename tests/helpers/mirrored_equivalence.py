"""Run in a fresh process: the trainer's step on 2 logical CPUs equals it on one device.

Prints one JSON line: the largest weight difference after a few SGD steps between
MirroredStrategy over two logical CPUs and the default strategy on the same global batches.
A loss averaged per replica, then summed across replicas, would double the gradients and show
here. SGD, not Adam: Adam's update hardly depends on the gradient's scale, so it would hide the bug.
"""

import json

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402

from bytenet_tf import zoo  # noqa: E402
from bytenet_tf.training.step import make_train_step  # noqa: E402
from pipelines import datasets, preprocessing  # noqa: E402


def global_batches(spec, batch_size, steps):
    config = preprocessing.PipelineConfig(batch_size=batch_size, bucketing=False, seed=0)
    return list(datasets.make_dataset(spec, config).take(steps))


def train(strategy, batches, steps):
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = zoo.build_model("bytenet_small", hidden_size=16, num_stacks=1, seed=0)
        optimizer = keras.optimizers.SGD(0.5)
        optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64, trainable=False)
    initial = [w.numpy() for w in model.trainable_variables]
    train_step = make_train_step(strategy, model, optimizer, step)
    replicas = strategy.num_replicas_in_sync
    # Each replica takes its share of the same global batch.
    def split(features, labels):
        size = labels.shape[0] // replicas
        return [({k: v[i * size:(i + 1) * size] for k, v in features.items()},
                 labels[i * size:(i + 1) * size]) for i in range(replicas)]
    shards = [shard for features, labels in batches for shard in split(features, labels)]
    per_replica = tf.data.Dataset.from_generator(
        lambda: iter(shards), output_signature=(
            {"source": tf.TensorSpec([None, None], tf.int32),
             "target": tf.TensorSpec([None, None], tf.int32)},
            tf.TensorSpec([None, None], tf.int32)))
    iterator = iter(strategy.distribute_datasets_from_function(lambda context: per_replica))
    losses = [float(train_step(iterator)[0]) for _ in range(steps)]
    return initial, [w.numpy() for w in model.trainable_variables], losses


def main():
    spec = datasets.DataSpec(dataset="digits", digits_config="thesis")
    steps = 3
    batches = global_batches(spec, 8, steps)
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    single = tf.distribute.get_strategy()
    _, weights_m, losses_m = train(mirrored, batches, steps)
    initial, weights_s, losses_s = train(single, batches, steps)
    difference = max(float(abs(a - b).max()) for a, b in zip(weights_m, weights_s))
    moved = max(float(abs(a - b).max()) for a, b in zip(weights_s, initial))
    print(json.dumps({"replicas": mirrored.num_replicas_in_sync, "max_weight_difference": difference,
                      "losses_mirrored": losses_m, "losses_single": losses_s,
                      "max_weight_change": moved}))


if __name__ == "__main__":
    main()
