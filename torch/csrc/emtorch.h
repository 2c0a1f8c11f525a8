/* emtorch: a small C ABI over libtorch's C++ API for the Go package torch.
 *
 * Rules of this header:
 *   - only plain C types and opaque handles; no C++ type crosses it;
 *   - every fallible function returns et_error: NULL on success, else a message the
 *     caller owns and frees with et_free_error. Results come back through out-params;
 *   - thread-local libtorch state (grad mode) is passed with each call in `flags`, so a
 *     caller that changes OS thread between two calls still gets what it asked for;
 *   - a tensor handle is owned by exactly one caller and freed with et_free;
 *   - every enum value is explicit, and ET_ABI_VERSION goes up with any change to a
 *     value, a signature or a meaning. The Go binary and this shim are built apart
 *     and paired at run time, so the caller checks et_abi_version() and then calls
 *     et_handshake() before any other function.
 */
#ifndef EMTORCH_H
#define EMTORCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1: the first versioned ABI (shims before it have no et_abi_version).
 * 2: et_keep_freed_memory replaces et_set_malloc_arenas.
 * 3: et_advise_huge_pages and et_index_add.
 * 4: et_set_cudnn_deterministic.
 * 5: process groups (et_group_*) and et_sync_batch_norm.
 * 6: et_set_num_threads sets OpenBLAS's thread count too; et_get_blas_threads.
 * 7: ET_RELU_INPLACE; et_set_blas_threads.
 * 8: et_sq_dist.
 * 9: et_host_alloc, et_host_free and et_adopt_host; et_from_host copies once to a GPU.
 * 10: et_store_serve and et_store_free.
 * 11: et_copy_from_host. */
#define ET_ABI_VERSION 11

typedef struct et_tensor_s *et_tensor;
typedef struct et_adam_s *et_adam;
typedef struct et_group_s *et_group;
typedef struct et_store_s *et_store;
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
  ET_NEG = 0, ET_EXP = 1, ET_LOG = 2, ET_SQRT = 3, ET_ABS = 4, ET_RELU = 5,
  ET_SIGMOID = 6, ET_LOGSIGMOID = 7, ET_TANH = 8, ET_SIN = 9, ET_COS = 10,
  ET_FLOOR = 11, ET_DETACH = 12, ET_CONTIGUOUS = 13, ET_CLONE = 14, ET_SQUARE = 15,
  ET_RECIPROCAL = 16, ET_ZEROS_LIKE = 17, ET_ONES_LIKE = 18, ET_RAND_LIKE = 19,
  ET_RANDN_LIKE = 20, ET_LOGICAL_NOT = 21, ET_ISFINITE = 22, ET_CHANNELS_LAST = 23,
  ET_RELU_INPLACE = 24 /* a's values become relu(a); out is a new handle to a */
};

/* binary ops, broadcasting: et_binary */
enum {
  ET_ADD = 0, ET_SUB = 1, ET_MUL = 2, ET_DIV = 3, ET_MATMUL = 4, ET_POW = 5,
  ET_MAXIMUM = 6, ET_MINIMUM = 7, ET_EQ = 8, ET_LT = 9, ET_GT = 10, ET_REMAINDER = 11,
  ET_ATAN2 = 12
};

/* tensor-scalar ops: et_scalar */
enum {
  ET_ADD_S = 0, ET_SUB_S = 1, ET_RSUB_S = 2, ET_MUL_S = 3, ET_DIV_S = 4, ET_POW_S = 5,
  ET_CLAMP_MIN = 6, ET_CLAMP_MAX = 7, ET_REMAINDER_S = 8, ET_LT_S = 9, ET_GT_S = 10,
  ET_EQ_S = 11
};

/* reductions over dims (ndims 0: all): et_reduce */
enum {
  ET_SUM = 0, ET_MEAN = 1, ET_AMAX = 2, ET_AMIN = 3, ET_VAR_BIASED = 4,
  ET_LOGSUMEXP = 5, ET_ARGMAX = 6, ET_ARGMIN = 7, ET_STD_BIASED = 8
};

/* ops along one dim: et_dim */
enum {
  ET_SOFTMAX = 0, ET_LOG_SOFTMAX = 1, ET_UNSQUEEZE = 2, ET_SQUEEZE = 3, ET_CUMSUM = 4,
  ET_FLATTEN_FROM = 5
};

/* creation: et_create */
enum {
  ET_ZEROS = 0, ET_ONES = 1, ET_RAND = 2, ET_RANDN = 3, ET_FULL = 4, ET_EMPTY = 5
};

/* grid_sample modes and padding */
enum { ET_BILINEAR = 0, ET_NEAREST = 1 };
enum { ET_PAD_ZEROS = 0, ET_PAD_BORDER = 1, ET_PAD_REFLECTION = 2 };

/* The ABI this shim was built with; the caller compares it with its ET_ABI_VERSION. */
int et_abi_version(void);
/* The shim's side of the check: an error naming both versions unless caller_abi is
 * this shim's ET_ABI_VERSION. */
et_error et_handshake(int caller_abi);

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
/* Host memory a CPU tensor can take over without a copy: et_host_alloc allocates
 * nbytes, aligned as libtorch's own (an error, not NULL, where there is no room);
 * et_adopt_host makes data, from et_host_alloc, the storage of a new CPU tensor of
 * dtype and shape, which frees it when freed. data is the shim's from the call on,
 * and freed at once on error; memory never adopted goes back with et_host_free. */
et_error et_host_alloc(int64_t nbytes, void **out);
void et_host_free(void *p);
et_error et_adopt_host(void *data, int dtype, const int64_t *shape, int ndim, et_tensor *out);
et_error et_to_host(et_tensor t, int dtype, void *dst, int64_t numel);
/* et_copy_from_host copies nbytes from data, laid out as dst's dtype and shape, into
 * dst, on its device: a load without a tensor in between. */
et_error et_copy_from_host(et_tensor dst, const void *data, int64_t nbytes);

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
/* a with the slices of src added at positions index along dim (out of place). */
et_error et_index_add(int flags, et_tensor a, int64_t dim, et_tensor index, et_tensor src,
                      et_tensor *out);
et_error et_index_select(int flags, et_tensor a, int64_t dim, et_tensor index,
                         et_tensor *out);
et_error et_gather(int flags, et_tensor a, int64_t dim, et_tensor index, et_tensor *out);
/* The squared distances between the rows of x (M×D) and those of c (K×D), M×K:
 * ||x||² − 2x·cᵀ + ||c||² as one product added to xsq (x's squared row norms, M×1),
 * clamped at 0 where rounding made a distance negative. One M×K tensor is made. */
et_error et_sq_dist(int flags, et_tensor x, et_tensor xsq, et_tensor c, et_tensor *out);
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

/* Process groups: c10d's Gloo (CPU tensors) or NCCL (CUDA tensors) over a TCPStore.
 * Every rank calls the collectives in the same order; each blocks until all ranks
 * took part or timeout_ms passed, and a lost peer is an error, not a hang. */
enum { ET_GLOO = 0, ET_NCCL = 1 };
/* Bit 0: this shim has Gloo; bit 1: NCCL. */
int et_dist_backends(void);
/* Joins group `rank` of `world`. The store is a TCPStore at host:port, served by this
 * process when serve_store is 1 (rank 0, unless a launcher hosts it; port 0 then
 * serves a world of one on a free port); keys live under prefix. iface names the
 * network interface Gloo uses ("" resolves this host's name), device_index the CUDA
 * device NCCL uses. */
et_error et_group_new(int backend, const char *host, int port, int serve_store,
                      const char *prefix, int rank, int world, int64_t timeout_ms,
                      const char *iface, int device_index, et_group *out);
et_error et_group_free(et_group g);
/* Serves a TCPStore at host:port for world ranks that join as clients (serve_store 0),
 * as a launcher does. Port 0 takes one the system finds free; *bound_port is the port
 * it listens on. */
et_error et_store_serve(const char *host, int port, int world, int64_t timeout_ms,
                        et_store *out, int *bound_port);
et_error et_store_free(et_store s);
/* Sums the tensors in place across ranks (one flattened buffer per dtype). */
et_error et_group_all_reduce(et_group g, const et_tensor *ts, int n);
/* Sums the gradients of params across ranks and multiplies them by scale, in place,
 * in one flattened buffer. Parameters without a gradient are skipped. */
et_error et_group_reduce_grads(et_group g, const et_tensor *params, int n, double scale);
/* Copies root's tensors into everyone's, in place. */
et_error et_group_broadcast(et_group g, const et_tensor *ts, int n, int root);
et_error et_group_barrier(et_group g);
/* The store shared by the group: set a key, or wait up to the group's timeout for it.
 * *value is the caller's to free with et_free_error. */
et_error et_group_store_set(et_group g, const char *key, const char *value);
et_error et_group_store_get(et_group g, const char *key, char **value);
/* *found is 1 when key is in the store now; it does not wait. */
et_error et_group_store_check(et_group g, const char *key, int *found);
/* A differentiable all-reduce: the sum of x over ranks, whose backward sums the
 * incoming gradients over ranks too. A statistic of the global batch built on it has
 * the gradient of one process holding that whole batch. */
et_error et_all_reduce_sum(int flags, et_group g, et_tensor x, et_tensor *out);
/* Batch norm in training with the statistics of the global batch (every rank holding
 * the same number of rows): et_batch_norm's result for the concatenated batch, with
 * the matching gradient, as torch.nn.SyncBatchNorm. */
et_error et_sync_batch_norm(int flags, et_group g, et_tensor x, et_tensor weight,
                            et_tensor bias, et_tensor running_mean, et_tensor running_var,
                            double momentum, double eps, et_tensor *out);

/* Process-wide settings. */
et_error et_manual_seed(uint64_t seed);
/* libtorch's intra-op threads (OpenMP's count is the calling thread's) and the BLAS's:
 * MKL's through libtorch, OpenBLAS's (process-wide) where it is loaded. */
et_error et_set_num_threads(int n);
int et_get_num_threads(void);
/* OpenBLAS's thread count, or -1 where OpenBLAS is not loaded. */
int et_get_blas_threads(void);
/* OpenBLAS's count alone, where it keeps a pool of its own (its pthreads build);
 * nothing elsewhere. */
et_error et_set_blas_threads(int n);
int et_cuda_available(void);
int et_cuda_device_count(void);
et_error et_cuda_synchronize(int device_index);
/* Device name and total memory in bytes; needs the CUDA build of the shim. */
et_error et_cuda_device_info(int device_index, char *name, int cap, int64_t *total_mem);
/* Peak bytes allocated on a CUDA device since the last reset; -1 on a CPU build. */
int64_t et_cuda_max_memory_allocated(int device_index);
et_error et_cuda_reset_peak_memory(int device_index);
void et_set_cudnn_benchmark(int on);
/* cuDNN's deterministic algorithms only, for bit-identical reruns on a GPU. */
void et_set_cudnn_deterministic(int on);
/* Makes glibc's malloc keep what a CPU training step frees for the next step: no
 * mmap for large blocks (each would be unmapped at free and faulted in again, page by
 * page, on the next step) and no trimming of the heap below 2 GiB of free top. A step
 * then reuses its own memory: tens of thousands of page faults per step fewer, for a
 * peak RSS a few percent higher. Call it before the first allocation that matters.
 * Returns 0 where unsupported (not glibc). */
int et_keep_freed_memory(void);
/* Installs a CPU allocator that asks the kernel (madvise MADV_HUGEPAGE) to back the
 * 2 MiB-aligned interior of every CPU tensor of 2 MiB or more with transparent huge
 * pages. A fresh 220 MB tensor then costs about 100 page faults instead of 55 000,
 * which on a virtual machine is most of the time of an element-wise op over it. It
 * only advises: where THP is off ("never") nothing changes. Returns 0 where
 * unsupported (not Linux) or where the allocator could not be set. */
int et_advise_huge_pages(void);
/* libtorch's version, e.g. "1.13.1", and whether the shim was built with CUDA. */
const char *et_version(void);
int et_built_with_cuda(void);

#ifdef __cplusplus
}
#endif
#endif
