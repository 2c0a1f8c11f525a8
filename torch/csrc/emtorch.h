/* emtorch: a small C ABI over libtorch's C++ API for the Go package torch.
 *
 * Rules of this header:
 *   - only plain C types and opaque handles; no C++ type crosses it;
 *   - every fallible function returns et_error: NULL on success, else a message the
 *     caller owns and frees with et_free_error. Results come back through out-params;
 *   - thread-local libtorch state (grad mode) is passed with each call in `flags`, so a
 *     caller that changes OS thread between two calls still gets what it asked for;
 *   - a tensor handle is owned by exactly one caller and freed with et_free.
 */
#ifndef EMTORCH_H
#define EMTORCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct et_tensor_s *et_tensor;
typedef struct et_adam_s *et_adam;
typedef char *et_error;

/* flags, passed with every op */
#define ET_NO_GRAD 1

/* dtypes */
enum {
  ET_FLOAT32 = 0,
  ET_FLOAT64 = 1,
  ET_INT64 = 2,
  ET_UINT8 = 3,
  ET_BFLOAT16 = 4,
  ET_BOOL = 5,
  ET_INT32 = 6,
  ET_FLOAT16 = 7
};

/* device types */
enum { ET_CPU = 0, ET_CUDA = 1 };

/* unary ops: et_unary */
enum {
  ET_NEG, ET_EXP, ET_LOG, ET_SQRT, ET_ABS, ET_RELU, ET_SIGMOID, ET_LOGSIGMOID,
  ET_TANH, ET_SIN, ET_COS, ET_FLOOR, ET_DETACH, ET_CONTIGUOUS, ET_CLONE, ET_SQUARE,
  ET_RECIPROCAL, ET_ZEROS_LIKE, ET_ONES_LIKE, ET_RAND_LIKE, ET_RANDN_LIKE,
  ET_LOGICAL_NOT, ET_ISFINITE, ET_CHANNELS_LAST
};

/* binary ops, broadcasting: et_binary */
enum {
  ET_ADD, ET_SUB, ET_MUL, ET_DIV, ET_MATMUL, ET_POW, ET_MAXIMUM, ET_MINIMUM,
  ET_EQ, ET_LT, ET_GT, ET_REMAINDER, ET_ATAN2
};

/* tensor-scalar ops: et_scalar */
enum {
  ET_ADD_S, ET_SUB_S, ET_RSUB_S, ET_MUL_S, ET_DIV_S, ET_POW_S, ET_CLAMP_MIN,
  ET_CLAMP_MAX, ET_REMAINDER_S, ET_LT_S, ET_GT_S, ET_EQ_S
};

/* reductions over dims (ndims 0: all): et_reduce */
enum {
  ET_SUM, ET_MEAN, ET_AMAX, ET_AMIN, ET_VAR_BIASED, ET_LOGSUMEXP, ET_ARGMAX,
  ET_ARGMIN, ET_STD_BIASED
};

/* ops along one dim: et_dim */
enum { ET_SOFTMAX, ET_LOG_SOFTMAX, ET_UNSQUEEZE, ET_SQUEEZE, ET_CUMSUM, ET_FLATTEN_FROM };

/* creation: et_create */
enum { ET_ZEROS, ET_ONES, ET_RAND, ET_RANDN, ET_FULL, ET_EMPTY };

/* grid_sample modes and padding */
enum { ET_BILINEAR = 0, ET_NEAREST = 1 };
enum { ET_PAD_ZEROS = 0, ET_PAD_BORDER = 1, ET_PAD_REFLECTION = 2 };

void et_free_error(et_error e);

/* Lifetime and introspection. */
et_error et_free(et_tensor t);
int64_t et_live_tensors(void);
et_error et_shape(et_tensor t, int64_t *dims, int cap, int *ndim);
et_error et_info(et_tensor t, int *dtype, int *device_type, int *device_index,
                 int *requires_grad);

/* Host data in and out. et_from_host copies nbytes from data. et_to_host converts to
 * dtype on the CPU and copies numel elements into dst. */
et_error et_from_host(const void *data, int dtype, const int64_t *shape, int ndim,
                      int device_type, int device_index, et_tensor *out);
et_error et_to_host(et_tensor t, int dtype, void *dst, int64_t numel);

/* Creation. */
et_error et_create(int flags, int op, const int64_t *shape, int ndim, double value,
                   int dtype, int device_type, int device_index, et_tensor *out);
et_error et_arange(int64_t n, int dtype, int device_type, int device_index,
                   et_tensor *out);
et_error et_randint(int64_t low, int64_t high, const int64_t *shape, int ndim,
                    int device_type, int device_index, et_tensor *out);
et_error et_randperm(int64_t n, int device_type, int device_index, et_tensor *out);

/* Moves and casts: dtype -1 keeps the dtype. */
et_error et_to(int flags, et_tensor t, int dtype, int device_type, int device_index,
               int non_blocking, et_tensor *out);
et_error et_pin_memory(et_tensor t, et_tensor *out);

/* Elementwise and reductions. */
et_error et_unary(int flags, int op, et_tensor a, et_tensor *out);
et_error et_binary(int flags, int op, et_tensor a, et_tensor b, et_tensor *out);
et_error et_scalar(int flags, int op, et_tensor a, double s, et_tensor *out);
et_error et_reduce(int flags, int op, et_tensor a, const int64_t *dims, int ndims,
                   int keepdim, et_tensor *out);
et_error et_dim(int flags, int op, et_tensor a, int64_t dim, et_tensor *out);
et_error et_where(int flags, et_tensor cond, et_tensor a, et_tensor b, et_tensor *out);
et_error et_clamp(int flags, et_tensor a, double lo, double hi, et_tensor *out);

/* Shapes and indexing. */
et_error et_reshape(int flags, et_tensor a, const int64_t *shape, int ndim,
                    et_tensor *out);
et_error et_expand(int flags, et_tensor a, const int64_t *shape, int ndim,
                   et_tensor *out);
et_error et_permute(int flags, et_tensor a, const int64_t *dims, int ndim,
                    et_tensor *out);
et_error et_transpose(int flags, et_tensor a, int64_t d0, int64_t d1, et_tensor *out);
et_error et_narrow(int flags, et_tensor a, int64_t dim, int64_t start, int64_t length,
                   et_tensor *out);
et_error et_index_select(int flags, et_tensor a, int64_t dim, et_tensor index,
                         et_tensor *out);
et_error et_gather(int flags, et_tensor a, int64_t dim, et_tensor index, et_tensor *out);
et_error et_cat(int flags, const et_tensor *ts, int n, int64_t dim, int stack,
                et_tensor *out);
et_error et_one_hot(int flags, et_tensor index, int64_t k, et_tensor *out);

/* Neural-network functions. Optional tensors may be NULL. */
et_error et_linear(int flags, et_tensor x, et_tensor w, et_tensor b, et_tensor *out);
et_error et_conv2d(int flags, et_tensor x, et_tensor w, et_tensor b, int64_t stride,
                   int64_t padding, et_tensor *out);
et_error et_max_pool2d(int flags, et_tensor x, int64_t kernel, int64_t stride,
                       et_tensor *out);
/* Batch norm over dim 1. In training it uses the batch statistics and updates
 * running_mean/var in place (when given) with momentum. */
et_error et_batch_norm(int flags, et_tensor x, et_tensor weight, et_tensor bias,
                       et_tensor running_mean, et_tensor running_var, int training,
                       double momentum, double eps, et_tensor *out);
et_error et_affine_grid(int flags, et_tensor theta, int64_t n, int64_t c, int64_t h,
                        int64_t w, int align_corners, et_tensor *out);
et_error et_grid_sample(int flags, et_tensor x, et_tensor grid, int mode, int padding,
                        int align_corners, et_tensor *out);
et_error et_nll_loss(int flags, et_tensor logp, et_tensor target, et_tensor *out);

/* In-place updates (always without grad). */
et_error et_copy_(et_tensor dst, et_tensor src);
et_error et_uniform_(et_tensor t, double lo, double hi);
et_error et_fill_(et_tensor t, double value);

/* Autograd. */
et_error et_set_requires_grad(et_tensor t, int on);
/* Replaces t's data with src's, keeping t's identity and autograd flags (PyTorch's
 * `param.data = src`): how a parameter changes its memory layout in place. Drops
 * t's gradient, if any. */
et_error et_set_data(et_tensor t, et_tensor src);
/* *out is 1 when t is laid out channels-last (NHWC strides), else 0. */
et_error et_is_channels_last(et_tensor t, int *out);
/* *out is NULL when t has no gradient. */
et_error et_grad(et_tensor t, et_tensor *out);
et_error et_backward(et_tensor loss);

/* Adam (PyTorch's update rule, no weight decay), one learning rate per parameter. */
et_error et_adam_new(const et_tensor *params, const double *lrs, int n, double beta1,
                     double beta2, double eps, et_adam *out);
et_error et_adam_free(et_adam a);
et_error et_adam_zero_grad(et_adam a);
et_error et_adam_step(et_adam a);
/* The state of parameter i: exp_avg and exp_avg_sq as new handles (aliasing the
 * state), and the step count. */
et_error et_adam_get_state(et_adam a, int i, et_tensor *exp_avg, et_tensor *exp_avg_sq,
                           int64_t *step);
et_error et_adam_set_state(et_adam a, int i, et_tensor exp_avg, et_tensor exp_avg_sq,
                           int64_t step);

/* Process-wide settings. */
et_error et_manual_seed(uint64_t seed);
et_error et_set_num_threads(int n);
int et_get_num_threads(void);
int et_cuda_available(void);
int et_cuda_device_count(void);
et_error et_cuda_synchronize(int device_index);
/* Device name and total memory in bytes; needs the CUDA build of the shim. */
et_error et_cuda_device_info(int device_index, char *name, int cap, int64_t *total_mem);
/* Peak bytes allocated on a CUDA device since the last reset; -1 on a CPU build. */
int64_t et_cuda_max_memory_allocated(int device_index);
et_error et_cuda_reset_peak_memory(int device_index);
void et_set_cudnn_benchmark(int on);
/* Caps glibc's malloc arenas (mallopt M_ARENA_MAX): ops run on whichever OS thread a
 * goroutine is on, and each thread's arena grows and shrinks on its own, which costs
 * page faults on large CPU tensors. Returns 0 where unsupported. */
int et_set_malloc_arenas(int n);
/* libtorch's version, e.g. "1.13.1", and whether the shim was built with CUDA. */
const char *et_version(void);
int et_built_with_cuda(void);

#ifdef __cplusplus
}
#endif
#endif
