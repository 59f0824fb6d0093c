// SELU and AlphaDropout's select for the CPU, in one pass each way, in float32 or bfloat16.
//
// TensorFlow's pip build compiles its Eigen kernels for AVX only: its bfloat16 elementwise ops
// convert element by element, so a bfloat16 SELU ran fastest as three float32 passes each way
// (cast, selu, cast), and the dropout's select and its gradient are two more passes. These
// ops read the input once, compute in float32 registers (AVX-512 where the CPU has it) and
// write once, rounding a bfloat16 result once, to nearest even. bytenet_tf/kernels/__init__.py
// compiles this file for the machine it runs on (-march=native) and falls back to
// TensorFlow's ops when it cannot.
//
//   BytenetSelu(x, keep) = keep ? scale * (x > 0 ? x : alpha * expm1(x)) : dropped
//   BytenetSeluGrad(dy, x, keep) = keep ? dy * (x > 0 ? scale : scale * alpha * exp(x)) : 0
// `keep` is a bool tensor of the shape of `x`, or a scalar for all units. The gradient reads
// the input `x`, not the output as TensorFlow's SeluGrad does: the slope `y + scale * alpha`
// of a bfloat16 `y` loses all precision where SELU saturates.

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

// Element access in float32 registers: float as is, bfloat16 through its 16 bits.
inline float Load(const float* data, int64_t i) { return data[i]; }
inline float Load(const uint16_t* data, int64_t i) { return ToFloat(data[i]); }
inline void Store(float* data, int64_t i, float value) { data[i] = value; }
inline void Store(uint16_t* data, int64_t i, float value) { data[i] = ToBfloat16(value); }

template <typename T> struct Storage { using Type = T; };
template <> struct Storage<::tensorflow::bfloat16> { using Type = uint16_t; };

template <typename T>
const typename Storage<T>::Type* In(const Tensor& tensor) {
  return reinterpret_cast<const typename Storage<T>::Type*>(tensor.flat<T>().data());
}

template <typename T>
typename Storage<T>::Type* Out(Tensor* tensor) {
  return reinterpret_cast<typename Storage<T>::Type*>(tensor->flat<T>().data());
}

inline float Selu(float v) {
  const float negative = kScale * kAlpha * NegativeExpm1(v > 0.0f ? 0.0f : v);
  return v > 0.0f ? kScale * v : negative;
}

inline float SeluSlope(float v) {
  const float negative = kScale * kAlpha * NegativeExp(v > 0.0f ? 0.0f : v);
  return v > 0.0f ? kScale : negative;
}

// `keep ? value : other` as bit operations on 32-bit words: GCC 12 does not vectorize a float
// select on a bool array.
inline float Choose(uint8_t keep, float value, float other) {
  const uint32_t mask = 0u - static_cast<uint32_t>(keep);
  uint32_t a, b;
  std::memcpy(&a, &value, sizeof(a));
  std::memcpy(&b, &other, sizeof(b));
  const uint32_t chosen = (a & mask) | (b & ~mask);
  float result;
  std::memcpy(&result, &chosen, sizeof(result));
  return result;
}

// The loops, on restrict pointers and with unconditional loads, so that they vectorize.
// `keep` null: every unit is kept if `all`, else dropped.
template <typename In, typename Out>
void SeluRange(const In* __restrict x, const uint8_t* __restrict keep, bool all, float dropped,
               Out* __restrict y, int64_t begin, int64_t end) {
  if (keep == nullptr && all) {
    for (int64_t i = begin; i < end; ++i) Store(y, i, Selu(Load(x, i)));
  } else if (keep == nullptr) {
    for (int64_t i = begin; i < end; ++i) Store(y, i, dropped);
  } else {
    for (int64_t i = begin; i < end; ++i) {
      const float value = Selu(Load(x, i));
      Store(y, i, Choose(keep[i], value, dropped));
    }
  }
}

template <typename In, typename Out>
void SeluGradRange(const In* __restrict dy, const In* __restrict x, const uint8_t* __restrict keep,
                   bool all, Out* __restrict dx, int64_t begin, int64_t end) {
  if (keep == nullptr && all) {
    for (int64_t i = begin; i < end; ++i) Store(dx, i, Load(dy, i) * SeluSlope(Load(x, i)));
  } else if (keep == nullptr) {
    for (int64_t i = begin; i < end; ++i) Store(dx, i, 0.0f);
  } else {
    for (int64_t i = begin; i < end; ++i) {
      const float value = Load(dy, i) * SeluSlope(Load(x, i));
      Store(dx, i, Choose(keep[i], value, 0.0f));
    }
  }
}

// The mask of `keep`: nullptr when it is a scalar (then `*all` holds its value).
::tensorflow::Status KeepMask(const Tensor& keep, const Tensor& like, const uint8_t** mask,
                              bool* all) {
  if (keep.NumElements() == 1 && keep.dims() == 0) {
    *mask = nullptr;
    *all = keep.scalar<bool>()();
    return ::tensorflow::OkStatus();
  }
  if (keep.shape() != like.shape()) {
    return ::tensorflow::errors::InvalidArgument(
        "keep must be a scalar or have the shape of the features; got ", keep.shape().DebugString(),
        " and ", like.shape().DebugString());
  }
  // A bool is one byte, 0 or 1.
  *mask = reinterpret_cast<const uint8_t*>(keep.flat<bool>().data());
  *all = true;
  return ::tensorflow::OkStatus();
}

template <typename T>
class SeluOp : public OpKernel {
 public:
  explicit SeluOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("dropped", &dropped_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& input = context->input(0);
    const uint8_t* keep = nullptr;
    bool all = true;
    OP_REQUIRES_OK(context, KeepMask(context->input(1), input, &keep, &all));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->forward_input_or_allocate_output({0}, 0, input.shape(), &output));
    const auto* x = In<T>(input);
    auto* y = Out<T>(output);
    const float dropped = dropped_;
    ParallelFor(context, input.NumElements(), [=](int64_t begin, int64_t end) {
      SeluRange(x, keep, all, dropped, y, begin, end);
    });
  }

 private:
  float dropped_;
};

template <typename T>
class SeluGradOp : public OpKernel {
 public:
  explicit SeluGradOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& upstream = context->input(0);
    const Tensor& features = context->input(1);
    OP_REQUIRES(context, upstream.shape() == features.shape(),
                ::tensorflow::errors::InvalidArgument(
                    "BytenetSeluGrad: gradients and features must have one shape; got ",
                    upstream.shape().DebugString(), " and ", features.shape().DebugString()));
    const uint8_t* keep = nullptr;
    bool all = true;
    OP_REQUIRES_OK(context, KeepMask(context->input(2), features, &keep, &all));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->forward_input_or_allocate_output({0}, 0, upstream.shape(), &output));
    const auto* dy = In<T>(upstream);
    const auto* x = In<T>(features);
    auto* dx = Out<T>(output);
    ParallelFor(context, upstream.NumElements(), [=](int64_t begin, int64_t end) {
      SeluGradRange(dy, x, keep, all, dx, begin, end);
    });
  }
};

}  // namespace

REGISTER_OP("BytenetSelu")
    .Input("features: T")
    .Input("keep: bool")
    .Output("activations: T")
    .Attr("T: {float, bfloat16}")
    .Attr("dropped: float = 0.0")
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("BytenetSeluGrad")
    .Input("gradients: T")
    .Input("features: T")
    .Input("keep: bool")
    .Output("backprops: T")
    .Attr("T: {float, bfloat16}")
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

#define REGISTER(T)                                                                            \
  REGISTER_KERNEL_BUILDER(                                                                     \
      Name("BytenetSelu").Device(::tensorflow::DEVICE_CPU).TypeConstraint<T>("T"), SeluOp<T>); \
  REGISTER_KERNEL_BUILDER(                                                                     \
      Name("BytenetSeluGrad").Device(::tensorflow::DEVICE_CPU).TypeConstraint<T>("T"),         \
      SeluGradOp<T>);
REGISTER(float)
REGISTER(::tensorflow::bfloat16)
#undef REGISTER

}  // namespace bytenet_tf
