// SELU on bfloat16 tensors for the CPU, in one pass each way.
//
// TensorFlow's pip build compiles its Eigen kernels for AVX only, so its bfloat16 elementwise
// ops convert element by element; a bfloat16 SELU ran 2.5x slower than casting to float32, and
// the cast path itself is three passes forward and three back. These two ops read bfloat16,
// compute in float32 registers and write bfloat16, with the same rounding as the cast path
// (round to nearest even, once). bytenet_tf/kernels/__init__.py compiles this file for the
// machine it runs on (-march=native) and falls back to TensorFlow's ops when it cannot.
//
//   BytenetSeluBfloat16(x) = bf16(scale * (x > 0 ? x : alpha * expm1(x)))
//   BytenetSeluBfloat16Grad(dy, x) = bf16(dy * (x > 0 ? scale : scale * alpha * exp(x)))
// The gradient reads the forward input `x`, not the output as TensorFlow's SeluGrad does: the
// slope `y + scale * alpha` of a bfloat16 `y` loses all precision where SELU saturates.

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/util/work_sharder.h"

namespace bytenet_tf {
namespace {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;

constexpr float kAlpha = 1.6732632423543772848170429916717f;
constexpr float kScale = 1.0507009873554804934193349852946f;

inline float ToFloat(uint16_t bits) {
  uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

// Round to nearest even, as tf.cast(float32 -> bfloat16); NaN stays a (quiet) NaN.
inline uint16_t ToBfloat16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  const uint32_t rounded = (word + 0x7FFFu + ((word >> 16) & 1u)) >> 16;
  const bool nan = (word & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<uint16_t>(nan ? ((word >> 16) | 0x40u) : rounded);
}

// exp(x) for x <= 0 (Cephes' expf), to about 2 float32 ulps and branch-free, so that the
// loops below vectorize.
inline float NegativeExp(float x) {
  x = x < -88.0f ? -88.0f : x;
  // exp(x) = 2^n * exp(r), |r| <= ln(2) / 2.
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float exp_r = p * r * r + r + 1.0f;
  const int32_t exponent = (static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &exponent, sizeof(two_n));
  return exp_r * two_n;
}

// expm1(x) for x <= 0: near 0, where exp(x) - 1 would cancel, the Taylor polynomial
// x + x^2/2! + ... + x^7/7! (relative error below 3e-8 for |x| < 0.25).
inline float NegativeExpm1(float x) {
  float q = 1.0f / 5040.0f;
  q = q * x + 1.0f / 720.0f;
  q = q * x + 1.0f / 120.0f;
  q = q * x + 1.0f / 24.0f;
  q = q * x + 1.0f / 6.0f;
  q = q * x + 0.5f;
  const float near = (q * x + 1.0f) * x;
  return x > -0.25f ? near : NegativeExp(x) - 1.0f;
}

template <typename Body>
void ParallelFor(OpKernelContext* context, int64_t size, Body body) {
  const auto* threads = context->device()->tensorflow_cpu_worker_threads();
  // About 20 cycles per element keeps small tensors on one thread.
  ::tensorflow::Shard(threads->num_threads, threads->workers, size, 20, body);
}

class SeluBfloat16Op : public OpKernel {
 public:
  explicit SeluBfloat16Op(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& input = context->input(0);
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->forward_input_or_allocate_output({0}, 0, input.shape(), &output));
    const auto* x = reinterpret_cast<const uint16_t*>(input.flat<::tensorflow::bfloat16>().data());
    auto* y = reinterpret_cast<uint16_t*>(output->flat<::tensorflow::bfloat16>().data());
    ParallelFor(context, input.NumElements(), [x, y](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float v = ToFloat(x[i]);
        const float negative = kScale * kAlpha * NegativeExpm1(v > 0.0f ? 0.0f : v);
        y[i] = ToBfloat16(v > 0.0f ? kScale * v : negative);
      }
    });
  }
};

class SeluBfloat16GradOp : public OpKernel {
 public:
  explicit SeluBfloat16GradOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& upstream = context->input(0);
    const Tensor& features = context->input(1);
    OP_REQUIRES(context, upstream.shape() == features.shape(),
                ::tensorflow::errors::InvalidArgument(
                    "BytenetSeluBfloat16Grad: gradients and features must have one shape; got ",
                    upstream.shape().DebugString(), " and ", features.shape().DebugString()));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->forward_input_or_allocate_output({0}, 0, upstream.shape(), &output));
    const auto* dy = reinterpret_cast<const uint16_t*>(upstream.flat<::tensorflow::bfloat16>().data());
    const auto* x = reinterpret_cast<const uint16_t*>(features.flat<::tensorflow::bfloat16>().data());
    auto* dx = reinterpret_cast<uint16_t*>(output->flat<::tensorflow::bfloat16>().data());
    ParallelFor(context, upstream.NumElements(), [dy, x, dx](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float v = ToFloat(x[i]);
        const float negative = kScale * kAlpha * NegativeExp(v > 0.0f ? 0.0f : v);
        const float slope = v > 0.0f ? kScale : negative;
        dx[i] = ToBfloat16(ToFloat(dy[i]) * slope);
      }
    });
  }
};

}  // namespace

REGISTER_OP("BytenetSeluBfloat16")
    .Input("features: bfloat16")
    .Output("activations: bfloat16")
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("BytenetSeluBfloat16Grad")
    .Input("gradients: bfloat16")
    .Input("features: bfloat16")
    .Output("backprops: bfloat16")
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

REGISTER_KERNEL_BUILDER(Name("BytenetSeluBfloat16").Device(::tensorflow::DEVICE_CPU),
                        SeluBfloat16Op);
REGISTER_KERNEL_BUILDER(Name("BytenetSeluBfloat16Grad").Device(::tensorflow::DEVICE_CPU),
                        SeluBfloat16GradOp);

}  // namespace bytenet_tf
