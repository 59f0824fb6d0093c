// SELU and AlphaDropout for the CPU, in one pass each way, in float32 or bfloat16.
//
// TensorFlow's pip build compiles its Eigen kernels for AVX only: its bfloat16 elementwise ops
// convert element by element, so a bfloat16 SELU ran fastest as three float32 passes each way
// (cast, selu, cast); the dropout's random numbers (Philox, one thread), its comparison and its
// select forward and back were five passes more. These ops read the input once, compute in
// float32 registers (AVX-512 where the CPU has it), draw the dropout's random bits from a
// counter-based hash of (seed, unit index) in the same pass, and write once, rounding a
// bfloat16 result once, to nearest even. bytenet_tf/kernels/__init__.py compiles this file for
// the machine it runs on (-march=native) and falls back to TensorFlow's ops when it cannot.
//
//   BytenetSelu(x, seed) = keep ? scale * (x > 0 ? x : alpha * expm1(x)) : dropped
//   BytenetSeluGrad(dy, x, seed) = keep ? dy * (x > 0 ? scale : scale * alpha * exp(x)) : 0
//   keep = UnitBits(seed, i) >= threshold, 16 random bits per unit; threshold 0 keeps all.
// The gradient draws the same bits from the same seed, so no mask is stored. It reads the input
// `x`, not the output as TensorFlow's SeluGrad does: the slope `y + scale * alpha` of a
// bfloat16 `y` loses all precision where SELU saturates.
//
// Two more passes of a residual block's training step, each one op instead of two or three:
//   BytenetMaskedSelu(x, mask) = mask[row] ? selu(x) : 0, one boolean per row of the last axis
//     (the encoder zeroes padded positions before each dilated convolution);
//   BytenetMaskedSeluGrad(dy, x, mask) = mask[row] ? dy * selu'(x) : 0;
//   BytenetScaledAdd(x, y) = x_scale * x + y_scale * y (a rescaled residual sum);
//   BytenetScaledAddGrad(dz) = (x_scale * dz, y_scale * dz), both in one pass.
// And the bias of a 1x1 convolution, added after oneDNN's product rather than fused into it:
//   BytenetBiasAdd(x, bias) = x + bias[channel], one bias value per channel of the last axis.
// oneDNN's bfloat16 product with a fused bias ran 1.5-3x as long as the product alone at a
// training step's shapes on an Intel Xeon with AMX (2,560 rows, 128 or 256 channels).

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

// `body(begin, end)` over [0, size) on the op's threads; a unit costs `cost` cycles (about 20
// per element keeps small tensors on one thread).
template <typename Body>
void ParallelFor(OpKernelContext* context, int64_t size, Body body, int64_t cost = 20) {
  const auto* threads = context->device()->tensorflow_cpu_worker_threads();
  ::tensorflow::Shard(threads->num_threads, threads->workers, size, cost, body);
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

// MurmurHash3's 32-bit finalizer: a bijection whose output bits each depend on all input bits.
inline uint32_t Mix(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

// The dropout of one op call: units whose 16 random bits are below `threshold` are dropped.
struct Dropout {
  uint32_t key0 = 0, key1 = 0;
  uint32_t threshold = 0;  // 0: keep every unit.
  float dropped = 0.0f;
};

// 16 random bits for unit `i`: the two halves of one 32-bit hash of (seed, i / 2), as
// AlphaDropout's TensorFlow path splits one 32-bit Philox number between two units.
inline uint32_t UnitBits(const Dropout& dropout, int64_t i) {
  const uint64_t word = static_cast<uint64_t>(i) >> 1;
  const uint32_t h = Mix(Mix(static_cast<uint32_t>(word) ^ dropout.key0) ^ dropout.key1
                         ^ static_cast<uint32_t>(word >> 32));
  return (i & 1) ? (h >> 16) : (h & 0xFFFFu);
}

// `keep ? value : other` as bit operations on 32-bit words, which GCC 12 vectorizes.
inline float Choose(bool keep, float value, float other) {
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
template <typename In, typename Out>
void SeluRange(const In* __restrict x, const Dropout dropout, Out* __restrict y, int64_t begin,
               int64_t end) {
  if (dropout.threshold == 0) {
    for (int64_t i = begin; i < end; ++i) Store(y, i, Selu(Load(x, i)));
  } else {
    for (int64_t i = begin; i < end; ++i) {
      const float value = Selu(Load(x, i));
      Store(y, i, Choose(UnitBits(dropout, i) >= dropout.threshold, value, dropout.dropped));
    }
  }
}

template <typename In, typename Out>
void SeluGradRange(const In* __restrict dy, const In* __restrict x, const Dropout dropout,
                   Out* __restrict dx, int64_t begin, int64_t end) {
  if (dropout.threshold == 0) {
    for (int64_t i = begin; i < end; ++i) Store(dx, i, Load(dy, i) * SeluSlope(Load(x, i)));
  } else {
    for (int64_t i = begin; i < end; ++i) {
      const float value = Load(dy, i) * SeluSlope(Load(x, i));
      Store(dx, i, Choose(UnitBits(dropout, i) >= dropout.threshold, value, 0.0f));
    }
  }
}

template <typename In, typename Out>
void MaskedSeluRange(const In* __restrict x, const bool* __restrict mask, int64_t channels,
                     Out* __restrict y, int64_t begin_row, int64_t end_row) {
  for (int64_t row = begin_row; row < end_row; ++row) {
    const int64_t begin = row * channels, end = begin + channels;
    if (mask[row]) {
      SeluRange(x, Dropout(), y, begin, end);
    } else {
      for (int64_t i = begin; i < end; ++i) Store(y, i, 0.0f);
    }
  }
}

template <typename In, typename Out>
void MaskedSeluGradRange(const In* __restrict dy, const In* __restrict x,
                         const bool* __restrict mask, int64_t channels, Out* __restrict dx,
                         int64_t begin_row, int64_t end_row) {
  for (int64_t row = begin_row; row < end_row; ++row) {
    const int64_t begin = row * channels, end = begin + channels;
    if (mask[row]) {
      SeluGradRange(dy, x, Dropout(), dx, begin, end);
    } else {
      for (int64_t i = begin; i < end; ++i) Store(dx, i, 0.0f);
    }
  }
}

template <typename In, typename Out>
void ScaledAddRange(const In* __restrict x, const In* __restrict y, float x_scale,
                    float y_scale, Out* __restrict z, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) Store(z, i, x_scale * Load(x, i) + y_scale * Load(y, i));
}

template <typename In, typename Out>
void BiasAddRange(const In* __restrict x, const In* __restrict bias, int64_t channels,
                  Out* __restrict y, int64_t begin, int64_t end) {
  for (int64_t row = begin; row < end; ++row) {
    const int64_t offset = row * channels;
    for (int64_t c = 0; c < channels; ++c) {
      Store(y, offset + c, Load(x, offset + c) + Load(bias, c));
    }
  }
}

template <typename In, typename Out>
void ScaledAddGradRange(const In* __restrict dz, float x_scale, float y_scale,
                        Out* __restrict dx, Out* __restrict dy, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const float value = Load(dz, i);
    Store(dx, i, x_scale * value);
    Store(dy, i, y_scale * value);
  }
}

// Reads the attributes `threshold` and `dropped`.
::tensorflow::Status ReadDropout(OpKernelConstruction* context, Dropout* dropout) {
  int threshold = 0;
  TF_RETURN_IF_ERROR(context->GetAttr("threshold", &threshold));
  TF_RETURN_IF_ERROR(context->GetAttr("dropped", &dropout->dropped));
  if (threshold < 0 || threshold > 0xFFFF) {
    return ::tensorflow::errors::InvalidArgument("threshold must be in [0, 65535]; got ", threshold);
  }
  dropout->threshold = static_cast<uint32_t>(threshold);
  return ::tensorflow::OkStatus();
}

// The call's keys, from the int32 seed of shape [2].
::tensorflow::Status ReadSeed(const Tensor& seed, Dropout* dropout) {
  if (seed.dims() != 1 || seed.NumElements() != 2) {
    return ::tensorflow::errors::InvalidArgument("seed must have shape [2]; got ",
                                                 seed.shape().DebugString());
  }
  const auto values = seed.flat<int32_t>();
  dropout->key0 = Mix(static_cast<uint32_t>(values(0)) ^ 0x9E3779B9u);
  dropout->key1 = Mix(static_cast<uint32_t>(values(1)) ^ 0x7F4A7C15u);
  return ::tensorflow::OkStatus();
}

// An error naming both shapes unless `a` and `b` have one shape.
::tensorflow::Status SameShape(const char* what, const Tensor& a, const Tensor& b) {
  if (a.shape() == b.shape()) return ::tensorflow::OkStatus();
  return ::tensorflow::errors::InvalidArgument(what, " must have one shape; got ",
                                               a.shape().DebugString(), " and ",
                                               b.shape().DebugString());
}

// Both ops: the dropout attributes, read once per kernel, and the per-call setup.
class DropoutKernel : public OpKernel {
 public:
  explicit DropoutKernel(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, ReadDropout(context, &dropout_));
  }

 protected:
  // This call's dropout (its seed is input `seed_input`) and an output shaped like input 0,
  // which may reuse input 0's buffer.
  ::tensorflow::Status Prepare(OpKernelContext* context, int seed_input, Dropout* dropout,
                               Tensor** output) {
    *dropout = dropout_;
    TF_RETURN_IF_ERROR(ReadSeed(context->input(seed_input), dropout));
    return context->forward_input_or_allocate_output({0}, 0, context->input(0).shape(), output);
  }

 private:
  Dropout dropout_;
};

template <typename T>
class SeluOp : public DropoutKernel {
 public:
  using DropoutKernel::DropoutKernel;

  void Compute(OpKernelContext* context) override {
    const Tensor& input = context->input(0);
    Dropout dropout;
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, Prepare(context, 1, &dropout, &output));
    const auto* x = In<T>(input);
    auto* y = Out<T>(output);
    ParallelFor(context, input.NumElements(), [=](int64_t begin, int64_t end) {
      SeluRange(x, dropout, y, begin, end);
    });
  }
};

template <typename T>
class SeluGradOp : public DropoutKernel {
 public:
  using DropoutKernel::DropoutKernel;

  void Compute(OpKernelContext* context) override {
    const Tensor& upstream = context->input(0);
    const Tensor& features = context->input(1);
    OP_REQUIRES_OK(context,
                   SameShape("BytenetSeluGrad: gradients and features", upstream, features));
    Dropout dropout;
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, Prepare(context, 2, &dropout, &output));
    const auto* dy = In<T>(upstream);
    const auto* x = In<T>(features);
    auto* dx = Out<T>(output);
    ParallelFor(context, upstream.NumElements(), [=](int64_t begin, int64_t end) {
      SeluGradRange(dy, x, dropout, dx, begin, end);
    });
  }
};

// The rows of `features` (all axes but the last) and its channels (the last axis), checked
// against a boolean `mask` of one value per row.
::tensorflow::Status CheckMask(const Tensor& features, const Tensor& mask, int64_t* rows,
                               int64_t* channels) {
  bool fits = features.dims() >= 1 && mask.dims() == features.dims() - 1;
  for (int axis = 0; fits && axis < mask.dims(); ++axis) {
    fits = mask.dim_size(axis) == features.dim_size(axis);
  }
  if (!fits) {
    return ::tensorflow::errors::InvalidArgument(
        "mask must have the shape of features without its last axis; got features ",
        features.shape().DebugString(), " and mask ", mask.shape().DebugString());
  }
  *channels = features.dim_size(features.dims() - 1);
  *rows = mask.NumElements();
  return ::tensorflow::OkStatus();
}

template <typename T>
class MaskedSeluOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  void Compute(OpKernelContext* context) override {
    const Tensor& input = context->input(0);
    const Tensor& mask = context->input(1);
    int64_t rows = 0, channels = 0;
    OP_REQUIRES_OK(context, CheckMask(input, mask, &rows, &channels));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context,
                   context->forward_input_or_allocate_output({0}, 0, input.shape(), &output));
    const auto* x = In<T>(input);
    const bool* keep = mask.flat<bool>().data();
    auto* y = Out<T>(output);
    ParallelFor(context, rows, [=](int64_t begin, int64_t end) {
      MaskedSeluRange(x, keep, channels, y, begin, end);
    }, 20 * channels);
  }
};

template <typename T>
class MaskedSeluGradOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  void Compute(OpKernelContext* context) override {
    const Tensor& upstream = context->input(0);
    const Tensor& features = context->input(1);
    const Tensor& mask = context->input(2);
    OP_REQUIRES_OK(context, SameShape("BytenetMaskedSeluGrad: gradients and features",
                                      upstream, features));
    int64_t rows = 0, channels = 0;
    OP_REQUIRES_OK(context, CheckMask(features, mask, &rows, &channels));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context,
                   context->forward_input_or_allocate_output({0}, 0, upstream.shape(), &output));
    const auto* dy = In<T>(upstream);
    const auto* x = In<T>(features);
    const bool* keep = mask.flat<bool>().data();
    auto* dx = Out<T>(output);
    ParallelFor(context, rows, [=](int64_t begin, int64_t end) {
      MaskedSeluGradRange(dy, x, keep, channels, dx, begin, end);
    }, 20 * channels);
  }
};

// Both scaled-add ops: the attributes `x_scale` and `y_scale`.
class ScaledAddKernel : public OpKernel {
 public:
  explicit ScaledAddKernel(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("x_scale", &x_scale_));
    OP_REQUIRES_OK(context, context->GetAttr("y_scale", &y_scale_));
  }

 protected:
  float x_scale_ = 1.0f, y_scale_ = 1.0f;
};

template <typename T>
class ScaledAddOp : public ScaledAddKernel {
 public:
  using ScaledAddKernel::ScaledAddKernel;

  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    const Tensor& y = context->input(1);
    OP_REQUIRES_OK(context, SameShape("BytenetScaledAdd: x and y", x, y));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context,
                   context->forward_input_or_allocate_output({0, 1}, 0, x.shape(), &output));
    const auto* a = In<T>(x);
    const auto* b = In<T>(y);
    auto* z = Out<T>(output);
    const float x_scale = x_scale_, y_scale = y_scale_;
    ParallelFor(context, x.NumElements(), [=](int64_t begin, int64_t end) {
      ScaledAddRange(a, b, x_scale, y_scale, z, begin, end);
    });
  }
};

template <typename T>
class ScaledAddGradOp : public ScaledAddKernel {
 public:
  using ScaledAddKernel::ScaledAddKernel;

  void Compute(OpKernelContext* context) override {
    const Tensor& upstream = context->input(0);
    Tensor* x_output = nullptr;
    Tensor* y_output = nullptr;
    OP_REQUIRES_OK(context, context->forward_input_or_allocate_output({0}, 0, upstream.shape(),
                                                                      &x_output));
    OP_REQUIRES_OK(context, context->allocate_output(1, upstream.shape(), &y_output));
    const auto* dz = In<T>(upstream);
    auto* dx = Out<T>(x_output);
    auto* dy = Out<T>(y_output);
    const float x_scale = x_scale_, y_scale = y_scale_;
    ParallelFor(context, upstream.NumElements(), [=](int64_t begin, int64_t end) {
      ScaledAddGradRange(dz, x_scale, y_scale, dx, dy, begin, end);
    });
  }
};

template <typename T>
class BiasAddOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  void Compute(OpKernelContext* context) override {
    const Tensor& input = context->input(0);
    const Tensor& bias = context->input(1);
    OP_REQUIRES(context, input.dims() >= 1 && bias.dims() == 1 &&
                             bias.dim_size(0) == input.dim_size(input.dims() - 1),
                ::tensorflow::errors::InvalidArgument(
                    "BytenetBiasAdd: bias must be a vector of the last axis of x; got x ",
                    input.shape().DebugString(), " and bias ", bias.shape().DebugString()));
    const int64_t channels = bias.dim_size(0);
    const int64_t rows = channels ? input.NumElements() / channels : 0;
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context,
                   context->forward_input_or_allocate_output({0}, 0, input.shape(), &output));
    const auto* x = In<T>(input);
    const auto* b = In<T>(bias);
    auto* y = Out<T>(output);
    ParallelFor(context, rows, [=](int64_t begin, int64_t end) {
      BiasAddRange(x, b, channels, y, begin, end);
    }, 2 * channels);
  }
};

}  // namespace

REGISTER_OP("BytenetSelu")
    .Input("features: T")
    .Input("seed: int32")
    .Output("activations: T")
    .Attr("T: {float, bfloat16}")
    .Attr("threshold: int = 0")
    .Attr("dropped: float = 0.0")
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("BytenetSeluGrad")
    .Input("gradients: T")
    .Input("features: T")
    .Input("seed: int32")
    .Output("backprops: T")
    .Attr("T: {float, bfloat16}")
    .Attr("threshold: int = 0")
    .Attr("dropped: float = 0.0")
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("BytenetMaskedSelu")
    .Input("features: T")
    .Input("mask: bool")
    .Output("activations: T")
    .Attr("T: {float, bfloat16}")
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("BytenetMaskedSeluGrad")
    .Input("gradients: T")
    .Input("features: T")
    .Input("mask: bool")
    .Output("backprops: T")
    .Attr("T: {float, bfloat16}")
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("BytenetScaledAdd")
    .Input("x: T")
    .Input("y: T")
    .Output("sum: T")
    .Attr("T: {float, bfloat16}")
    .Attr("x_scale: float")
    .Attr("y_scale: float")
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("BytenetScaledAddGrad")
    .Input("gradients: T")
    .Output("x_backprops: T")
    .Output("y_backprops: T")
    .Attr("T: {float, bfloat16}")
    .Attr("x_scale: float")
    .Attr("y_scale: float")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      c->set_output(1, c->input(0));
      return ::tensorflow::OkStatus();
    });

REGISTER_OP("BytenetBiasAdd")
    .Input("x: T")
    .Input("bias: T")
    .Output("sum: T")
    .Attr("T: {float, bfloat16}")
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

#define KERNEL(NAME, OP, T) \
  REGISTER_KERNEL_BUILDER(  \
      Name(NAME).Device(::tensorflow::DEVICE_CPU).TypeConstraint<T>("T"), OP<T>);
#define REGISTER(T)                                    \
  KERNEL("BytenetSelu", SeluOp, T)                     \
  KERNEL("BytenetSeluGrad", SeluGradOp, T)             \
  KERNEL("BytenetMaskedSelu", MaskedSeluOp, T)         \
  KERNEL("BytenetMaskedSeluGrad", MaskedSeluGradOp, T) \
  KERNEL("BytenetScaledAdd", ScaledAddOp, T)           \
  KERNEL("BytenetScaledAddGrad", ScaledAddGradOp, T)   \
  KERNEL("BytenetBiasAdd", BiasAddOp, T)
REGISTER(float)
REGISTER(::tensorflow::bfloat16)
#undef REGISTER
#undef KERNEL

}  // namespace bytenet_tf
