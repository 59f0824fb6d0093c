"""Whether computing the optimizer's scalars once per step would save a training step: the
`Adam` of `bytenet-train` against the same update with its scalars computed once per step
instead of once per variable, timed alternately in one process.

    python benchmarks/optimizer_cost.py --hidden_size=256 --num_stacks=3 --batch_size=32 \\
        --length=80 --precision=mixed_bfloat16 --dropout_rate=0 --rounds=10 --steps=3

`per_variable` is the binary's `Adam`: Keras's decoupled weight decay evaluates the learning-rate
schedule once for every variable, and each variable's update computes `beta_1**t` and
`beta_2**t`, so at the text preset's 186 variables the step's graph holds about 7,600 more small
ops than it needs. `once` computes the schedule and both powers once per step and applies the
decay in each variable's update, just before its Adam update (`OnceAdam`). Both run
`bytenet-train`'s train step on the same real batches from the same weights
(`benchmarks/train_throughput.py`'s `build_step`) with the text preset's optimizer settings,
weight decay included, alternated as in `benchmarks/residual_gate_cost.py`. Reports the number
of ops in each step's graph, each round's ratio of median step times (once over per_variable),
their median, and the largest difference between the two models' weights at the end (the decay
is the same product, whose float rounding may differ by an ulp). The last line printed is one
JSON object.
"""

import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bytenet_tf  # noqa: E402,F401  (before TensorFlow: the binaries' oneDNN setting)
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks.residual_gate_cost import alternate, alternation_arguments  # noqa: E402
from benchmarks.train_throughput import build_step, significant  # noqa: E402
from bytenet_tf.training.optimizer import Adam  # noqa: E402


class OnceAdam(Adam):
    """The binary's `Adam` with the learning-rate schedule, `beta_1**t` and `beta_2**t`
    computed once per step, and the decoupled weight decay applied in each variable's update
    (before its Adam update) with that rate."""

    def _apply_weight_decay(self, variables):
        del variables  # applied in `update_step`

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        # The scalars travel to each variable's update as its `learning_rate` argument, as
        # Keras passes the rate, so that under a strategy each replica gets its own.
        step = tf.cast(self.iterations + 1, tf.float32)
        scalars = (learning_rate, tf.pow(tf.cast(self.beta_1, tf.float32), step),
                   tf.pow(tf.cast(self.beta_2, tf.float32), step))
        super()._backend_update_step(grads, trainable_variables, scalars)

    def update_step(self, gradient, variable, learning_rate):
        learning_rate, beta_1_power, beta_2_power = learning_rate
        target = variable.value if isinstance(variable, keras.Variable) else variable
        dtype = target.dtype
        learning_rate = tf.cast(learning_rate, dtype)
        if self.weight_decay is not None and self._use_weight_decay(variable):
            target.assign_sub(target * tf.cast(self.weight_decay, dtype) * learning_rate)
        index = self._get_variable_index(variable)
        tf.raw_ops.ResourceApplyAdam(
            var=target.handle, m=self._momentums[index].value.handle,
            v=self._velocities[index].value.handle,
            beta1_power=tf.cast(beta_1_power, dtype), beta2_power=tf.cast(beta_2_power, dtype),
            lr=learning_rate, beta1=tf.cast(self.beta_1, dtype),
            beta2=tf.cast(self.beta_2, dtype), epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(tf.convert_to_tensor(gradient), dtype))


def graph_ops(train_step, iterator):
    """The number of ops in `train_step`'s graph, its functions' bodies included."""
    graph = train_step.get_concrete_function(iterator).graph.as_graph_def()
    counts = collections.Counter(node.op for node in graph.node)
    for function in graph.library.function:
        counts.update(node.op for node in function.node_def)
    return sum(counts.values())


def main():
    args, steps_per_round = alternation_arguments(__doc__, steps=3)
    steps, weights, ops = {}, {}, {}
    for name, optimizer_class in (("per_variable", Adam), ("once", OnceAdam)):
        model, train_step, iterator = build_step(args, optimizer_class=optimizer_class)
        ops[name] = graph_ops(train_step, iterator)
        steps[name] = (train_step, iterator)
        weights[name] = model.trainable_variables
    medians, ratios = alternate(steps, args.warmup, args.rounds, steps_per_round)
    # Same batches, same weights at the start, same update up to rounding.
    difference = max(float(np.max(np.abs(a.numpy() - b.numpy())))
                     for a, b in zip(weights["per_variable"], weights["once"]))
    seconds = {name: float(np.median(values)) for name, values in medians.items()}
    result = {
        "model": args.model, "hidden_size": args.hidden_size, "num_stacks": args.num_stacks,
        "batch_size": args.batch_size, "length": args.length, "precision": args.precision,
        "dropout_rate": model.dropout_rate, "rounds": args.rounds,
        "steps_per_round": steps_per_round, "graph_ops": ops,
        "seconds_per_step": {name: significant(value) for name, value in seconds.items()},
        "once_over_per_variable_per_round": [significant(r, 4) for r in ratios],
        "once_over_per_variable": significant(float(np.median(ratios)), 4),
        "largest_weight_difference": difference,
    }
    print(f"graph ops: per_variable {ops['per_variable']}, once {ops['once']}; once over "
          f"per_variable: median {result['once_over_per_variable']:.3f} over {args.rounds} "
          f"rounds (range {min(ratios):.3f}-{max(ratios):.3f}); largest weight difference "
          f"{difference:.3g}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
