// emtorch.cpp implements emtorch.h over ATen. It includes ATen rather than
// <torch/torch.h>: the narrower headers cost a fraction of the compile time, and the
// API used here exists from libtorch 1.13 to 2.x.
#include "emtorch.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/autograd/custom_function.h>

// Process groups: built with Gloo (-DEMTORCH_GLOO -DUSE_C10D_GLOO, headers from
// libgloo-dev or the libtorch archive) and/or NCCL (-DEMTORCH_NCCL -DUSE_C10D_NCCL).
#if defined(EMTORCH_GLOO) || defined(EMTORCH_NCCL)
#define EMTORCH_DIST 1
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif
#ifdef EMTORCH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef EMTORCH_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#ifdef EMTORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

#if defined(__GLIBC__)
#include <malloc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>
#endif
#if defined(__linux__)
#include <dlfcn.h>
#include <sys/mman.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <cstring>
#include <iostream>
#include <streambuf>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct et_tensor_s {
  at::Tensor t;
};

namespace {

std::atomic<int64_t> live{0};

// Returned when strdup cannot copy a message: a null error would read as success.
char out_of_memory[] = "out of memory (the error's message could not be copied)";

et_error fail(const char *msg) {
  char *e = strdup(msg);
  return e != nullptr ? e : out_of_memory;
}

et_tensor wrap(at::Tensor t) {
  auto *w = new et_tensor_s{std::move(t)}; // counted once it exists
  live.fetch_add(1, std::memory_order_relaxed);
  return w;
}

// unwrap_free frees a handle made in a call that then failed, before the caller
// could take it.
void unwrap_free(et_tensor t) {
  delete t;
  live.fetch_sub(1, std::memory_order_relaxed);
}

#if defined(__GLIBC__) && defined(__x86_64__)
// EMTORCH_BACKTRACE=1: a fault inside libtorch prints where it happened, which Go's
// crash report leaves out, then kills the process. Go forwards a fault in C code to
// the handler installed before its runtime started, and the shim's constructors run
// before it. It runs below Go's signal handler, whose frames stop an unwinder (glibc's
// backtrace faults there), so this prints the faulting thread, the faulting
// instruction and the stack's words that point into a library: its likely return
// addresses. dladdr and snprintf are not async-signal-safe: acceptable on the way down.
void put_stderr(const char *s, int n, size_t cap) {
  if (n > 0 && write(STDERR_FILENO, s, std::min<size_t>(n, cap - 1)) < 0) return; // nowhere to report it
}

void print_address(const char *what, uintptr_t a) {
  Dl_info d;
  char line[768];
  int n;
  if (dladdr(reinterpret_cast<void *>(a), &d) != 0 && d.dli_fname != nullptr) {
    uintptr_t base = reinterpret_cast<uintptr_t>(d.dli_sname != nullptr ? d.dli_saddr : d.dli_fbase);
    n = snprintf(line, sizeof line, "  %s 0x%lx %s(%s+0x%lx)\n", what, static_cast<unsigned long>(a),
                 d.dli_fname, d.dli_sname != nullptr ? d.dli_sname : "", static_cast<unsigned long>(a - base));
  } else {
    n = snprintf(line, sizeof line, "  %s 0x%lx\n", what, static_cast<unsigned long>(a));
  }
  put_stderr(line, n, sizeof line);
}

void print_native_frames(int sig, siginfo_t *info, void *ctx) {
  const auto &regs = static_cast<ucontext_t *>(ctx)->uc_mcontext.gregs;
  char head[200], name[17] = "";
  prctl(PR_GET_NAME, name); // libtorch and Gloo name some of their threads
  int n = snprintf(head, sizeof head, "emtorch: signal %d at address %p on thread %ld \"%s\" (EMTORCH_BACKTRACE=1):\n",
                   sig, info->si_addr, static_cast<long>(syscall(SYS_gettid)), name);
  put_stderr(head, n, sizeof head);
  print_address("fault at", static_cast<uintptr_t>(regs[REG_RIP]));
  // The stack's words are copied by the kernel, a page at a time, which stops at the
  // first page it cannot read (the stack's end, a guard page) where a plain read
  // would fault inside this handler.
  static uintptr_t words[1024];
  const uintptr_t sp = static_cast<uintptr_t>(regs[REG_RSP]);
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  struct iovec local = {words, sizeof words}, remote[4];
  int pages = 0;
  for (uintptr_t at = sp, end = sp + sizeof words; at < end && pages < 4; pages++) {
    uintptr_t next = std::min(end, (at & ~(page - 1)) + page);
    remote[pages] = {reinterpret_cast<void *>(at), next - at};
    at = next;
  }
  ssize_t got = process_vm_readv(getpid(), &local, 1, remote, pages, 0);
  Dl_info d;
  for (int i = 0, shown = 0; i < got / static_cast<ssize_t>(sizeof(uintptr_t)) && shown < 48; i++) {
    if (dladdr(reinterpret_cast<void *>(words[i]), &d) != 0 && d.dli_sname != nullptr) {
      print_address("stack", words[i]);
      shown++;
    }
  }
  signal(sig, SIG_DFL); // delivered again once this handler returns, and fatal
  raise(sig);
}

__attribute__((constructor)) void install_native_frames() {
  const char *on = getenv("EMTORCH_BACKTRACE");
  if (on == nullptr || strcmp(on, "1") != 0) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = print_native_frames;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
}
#endif

#if defined(__linux__)
// libtorch 2.3 made Allocator::allocate non-const and added the pure copy_data.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define ET_ALLOCATE_CONST
#define ET_ALLOCATOR_COPY_DATA 1
#else
#define ET_ALLOCATE_CONST const
#define ET_ALLOCATOR_COPY_DATA 0
#endif

// HugePageAllocator is libtorch's own CPU allocator plus one madvise per large block
// (see et_advise_huge_pages). Blocks come from and go back to the wrapped allocator,
// so a DataPtr made before it was installed is freed the same way as one made after.
class HugePageAllocator final : public c10::Allocator {
public:
  explicit HugePageAllocator(c10::Allocator *base) : base_(base) {}

  c10::DataPtr allocate(size_t n) ET_ALLOCATE_CONST override {
    c10::DataPtr p = base_->allocate(n);
    constexpr uintptr_t huge = uintptr_t(2) << 20;
    auto start = (reinterpret_cast<uintptr_t>(p.get()) + huge - 1) & ~(huge - 1);
    auto end = (reinterpret_cast<uintptr_t>(p.get()) + n) & ~(huge - 1);
    if (p.get() != nullptr && end > start) {
      // Advice only: a failure leaves the block on small pages, as before.
      (void)madvise(reinterpret_cast<void *>(start), end - start, MADV_HUGEPAGE);
    }
    return p;
  }

  c10::DeleterFnPtr raw_deleter() const override { return base_->raw_deleter(); }

#if ET_ALLOCATOR_COPY_DATA
  void copy_data(void *dest, const void *src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#endif

private:
  c10::Allocator *base_;
};
#endif

// Mode applies the per-call thread-local state carried in flags.
struct Mode {
  c10::AutoGradMode grad;
  explicit Mode(int flags) : grad(!(flags & ET_NO_GRAD)) {}
};

at::ScalarType scalar_type(int dtype) {
  switch (dtype) {
  case ET_FLOAT32: return at::kFloat;
  case ET_FLOAT64: return at::kDouble;
  case ET_INT64: return at::kLong;
  case ET_UINT8: return at::kByte;
  case ET_BFLOAT16: return at::kBFloat16;
  case ET_BOOL: return at::kBool;
  case ET_INT32: return at::kInt;
  case ET_FLOAT16: return at::kHalf;
  }
  TORCH_CHECK(false, "unknown dtype code ", dtype);
}

int dtype_code(at::ScalarType s) {
  switch (s) {
  case at::kFloat: return ET_FLOAT32;
  case at::kDouble: return ET_FLOAT64;
  case at::kLong: return ET_INT64;
  case at::kByte: return ET_UINT8;
  case at::kBFloat16: return ET_BFLOAT16;
  case at::kBool: return ET_BOOL;
  case at::kInt: return ET_INT32;
  case at::kHalf: return ET_FLOAT16;
  default: return -1;
  }
}

at::Device device(int type, int index) {
  if (type == ET_CPU) return at::Device(at::kCPU);
  TORCH_CHECK(type == ET_CUDA, "unknown device type code ", type);
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
}

at::TensorOptions options(int dtype, int dtype_device, int index) {
  return at::TensorOptions().dtype(scalar_type(dtype)).device(device(dtype_device, index));
}

at::Tensor opt(et_tensor t) { return t ? t->t : at::Tensor(); }

const at::Tensor &need(et_tensor t, const char *what) {
  TORCH_CHECK(t != nullptr && t->t.defined(), what, ": missing tensor");
  return t->t;
}

} // namespace

#define ET_TRY try {
#define ET_CATCH                                                                     \
  }                                                                                  \
  catch (const c10::Error &e) {                                                      \
    return fail(e.what_without_backtrace());                                         \
  }                                                                                  \
  catch (const std::exception &e) {                                                  \
    return fail(e.what());                                                           \
  }                                                                                  \
  catch (...) {                                                                      \
    return fail("unknown C++ exception");                                            \
  }                                                                                  \
  return nullptr;

extern "C" {

int et_abi_version(void) { return ET_ABI_VERSION; }

et_error et_handshake(int caller_abi) {
  ET_TRY
  TORCH_CHECK(caller_abi == ET_ABI_VERSION, "the caller was built for emtorch ABI ",
              caller_abi, ", but this shim (libtorch ", TORCH_VERSION, ") is ABI ",
              ET_ABI_VERSION);
  ET_CATCH
}

void et_free_error(et_error e) {
  if (e != out_of_memory) free(e);
}

et_error et_free(et_tensor t) {
  ET_TRY
  if (t) {
    delete t;
    live.fetch_sub(1, std::memory_order_relaxed);
  }
  ET_CATCH
}

int64_t et_live_tensors(void) { return live.load(); }

et_error et_shape(et_tensor t, int64_t *dims, int cap, int *ndim) {
  ET_TRY
  const auto &x = need(t, "shape");
  auto s = x.sizes();
  *ndim = static_cast<int>(s.size());
  TORCH_CHECK(static_cast<int>(s.size()) <= cap, "tensor has ", s.size(), " dims, more than ", cap);
  for (size_t i = 0; i < s.size(); i++) dims[i] = s[i];
  ET_CATCH
}

et_error et_info(et_tensor t, int *dtype, int *device_type, int *device_index,
                 int *requires_grad) {
  ET_TRY
  const auto &x = need(t, "info");
  *dtype = dtype_code(x.scalar_type());
  *device_type = x.device().is_cuda() ? ET_CUDA : ET_CPU;
  *device_index = x.device().has_index() ? x.device().index() : 0;
  *requires_grad = x.requires_grad() ? 1 : 0;
  ET_CATCH
}

et_error et_from_host(const void *data, int dtype, const int64_t *shape, int ndim,
                      int device_type, int device_index, et_tensor *out) {
  ET_TRY
  std::vector<int64_t> sz(shape, shape + ndim);
  auto blob = at::from_blob(const_cast<void *>(data), sz, at::TensorOptions().dtype(scalar_type(dtype)));
  auto dev = device(device_type, device_index);
  // A copy to another device is synchronous from pageable memory: straight from data,
  // without a CPU clone first (which glibc, set by et_keep_freed_memory, would keep).
  *out = wrap(dev.is_cpu() ? blob.clone() : blob.to(dev));
  ET_CATCH
}

et_error et_copy_from_host(et_tensor dst, const void *data, int64_t nbytes) {
  ET_TRY
  auto &t = need(dst, "copy_from_host");
  TORCH_CHECK(nbytes == static_cast<int64_t>(t.nbytes()), "copy_from_host: ", nbytes, " bytes for a tensor of ", t.nbytes());
  c10::NoGradGuard g;
  t.copy_(at::from_blob(const_cast<void *>(data), t.sizes(), at::TensorOptions().dtype(t.scalar_type())));
  ET_CATCH
}

et_error et_host_alloc(int64_t nbytes, void **out) {
  ET_TRY
  TORCH_CHECK(nbytes >= 0, "host_alloc: ", nbytes, " bytes");
  // Aligned as libtorch's CPU allocator aligns (c10::gAlignment), for its kernels.
  void *p = nullptr;
  TORCH_CHECK(posix_memalign(&p, 64, std::max<int64_t>(nbytes, 1)) == 0 && p != nullptr, "host_alloc: no room for ", nbytes, " bytes");
  *out = p;
  ET_CATCH
}

void et_host_free(void *p) { std::free(p); }

et_error et_adopt_host(void *data, int dtype, const int64_t *shape, int ndim, et_tensor *out) {
  // One owner of data at any time, which frees it once: this DataPtr (made without a
  // throw), then the storage it moves into, then the tensor.
  c10::DataPtr owner(data, data, &std::free, c10::Device(c10::kCPU));
  ET_TRY
  std::vector<int64_t> sz(shape, shape + ndim);
  auto type = scalar_type(dtype);
  int64_t n = 1;
  for (auto d : sz) {
    TORCH_CHECK(d >= 0, "adopt_host: shape ", c10::IntArrayRef(sz));
    n *= d;
  }
  c10::Storage storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(n) * c10::elementSize(type),
                       std::move(owner), nullptr, false);
  auto t = at::empty({0}, at::TensorOptions().dtype(type)).set_(std::move(storage), 0, sz);
  *out = wrap(std::move(t));
  ET_CATCH
}

et_error et_to_host(et_tensor t, int dtype, void *dst, int64_t numel) {
  ET_TRY
  auto x = need(t, "to_host").detach().to(at::kCPU, scalar_type(dtype)).contiguous();
  TORCH_CHECK(x.numel() == numel, "to_host: tensor has ", x.numel(), " elements, buffer ", numel);
  if (numel > 0) std::memcpy(dst, x.data_ptr(), numel * x.element_size());
  ET_CATCH
}

et_error et_create(int flags, int op, const int64_t *shape, int ndim, double value,
                   int dtype, int device_type, int device_index, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  std::vector<int64_t> sz(shape, shape + ndim);
  auto o = options(dtype, device_type, device_index);
  at::Tensor r;
  switch (op) {
  case ET_ZEROS: r = at::zeros(sz, o); break;
  case ET_ONES: r = at::ones(sz, o); break;
  case ET_RAND: r = at::rand(sz, o); break;
  case ET_RANDN: r = at::randn(sz, o); break;
  case ET_FULL: r = at::full(sz, value, o); break;
  case ET_EMPTY: r = at::empty(sz, o); break;
  default: TORCH_CHECK(false, "unknown create op ", op);
  }
  *out = wrap(std::move(r));
  ET_CATCH
}

et_error et_arange(int64_t n, int dtype, int device_type, int device_index,
                   et_tensor *out) {
  ET_TRY
  *out = wrap(at::arange(n, options(dtype, device_type, device_index)));
  ET_CATCH
}

et_error et_randint(int64_t low, int64_t high, const int64_t *shape, int ndim,
                    int device_type, int device_index, et_tensor *out) {
  ET_TRY
  std::vector<int64_t> sz(shape, shape + ndim);
  *out = wrap(at::randint(low, high, sz, options(ET_INT64, device_type, device_index)));
  ET_CATCH
}

et_error et_randperm(int64_t n, int device_type, int device_index, et_tensor *out) {
  ET_TRY
  *out = wrap(at::randperm(n, options(ET_INT64, device_type, device_index)));
  ET_CATCH
}

et_error et_to(int flags, et_tensor t, int dtype, int device_type, int device_index,
               int non_blocking, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  const auto &x = need(t, "to");
  auto st = dtype < 0 ? x.scalar_type() : scalar_type(dtype);
  auto dev = device(device_type, device_index);
  // To the host, a non-blocking copy may still be running when the caller reads the
  // memory (et_to_host): only copies to a device may be left to the stream.
  *out = wrap(x.to(dev, st, non_blocking != 0 && !dev.is_cpu()));
  ET_CATCH
}

et_error et_pin_memory(et_tensor t, et_tensor *out) {
  ET_TRY
  *out = wrap(need(t, "pin_memory").pin_memory());
  ET_CATCH
}

et_error et_unary(int flags, int op, et_tensor a, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  const auto &x = need(a, "unary");
  at::Tensor r;
  switch (op) {
  case ET_NEG: r = x.neg(); break;
  case ET_EXP: r = x.exp(); break;
  case ET_LOG: r = x.log(); break;
  case ET_SQRT: r = x.sqrt(); break;
  case ET_ABS: r = x.abs(); break;
  case ET_RELU: r = at::relu(x); break;
  case ET_SIGMOID: r = at::sigmoid(x); break;
  case ET_LOGSIGMOID: r = at::log_sigmoid(x); break;
  case ET_TANH: r = at::tanh(x); break;
  case ET_SIN: r = x.sin(); break;
  case ET_COS: r = x.cos(); break;
  case ET_FLOOR: r = x.floor(); break;
  case ET_DETACH: r = x.detach(); break;
  case ET_CONTIGUOUS: r = x.contiguous(); break;
  case ET_CLONE: r = x.clone(); break;
  case ET_SQUARE: r = x.square(); break;
  case ET_RECIPROCAL: r = x.reciprocal(); break;
  case ET_ZEROS_LIKE: r = at::zeros_like(x); break;
  case ET_ONES_LIKE: r = at::ones_like(x); break;
  case ET_RAND_LIKE: r = at::rand_like(x); break;
  case ET_RANDN_LIKE: r = at::randn_like(x); break;
  case ET_LOGICAL_NOT: r = x.logical_not(); break;
  case ET_ISFINITE: r = x.isfinite(); break;
  case ET_CHANNELS_LAST: r = x.contiguous(at::MemoryFormat::ChannelsLast); break;
  case ET_RELU_INPLACE: r = x.relu_(); break;
  default: TORCH_CHECK(false, "unknown unary op ", op);
  }
  *out = wrap(std::move(r));
  ET_CATCH
}

et_error et_binary(int flags, int op, et_tensor a, et_tensor b, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  const auto &x = need(a, "binary lhs");
  const auto &y = need(b, "binary rhs");
  at::Tensor r;
  switch (op) {
  case ET_ADD: r = x.add(y); break;
  case ET_SUB: r = x.sub(y); break;
  case ET_MUL: r = x.mul(y); break;
  case ET_DIV: r = x.div(y); break;
  case ET_MATMUL: r = x.matmul(y); break;
  case ET_POW: r = x.pow(y); break;
  case ET_MAXIMUM: r = at::maximum(x, y); break;
  case ET_MINIMUM: r = at::minimum(x, y); break;
  case ET_EQ: r = x.eq(y); break;
  case ET_LT: r = x.lt(y); break;
  case ET_GT: r = x.gt(y); break;
  case ET_REMAINDER: r = x.remainder(y); break;
  case ET_ATAN2: r = x.atan2(y); break;
  default: TORCH_CHECK(false, "unknown binary op ", op);
  }
  *out = wrap(std::move(r));
  ET_CATCH
}

et_error et_scalar(int flags, int op, et_tensor a, double s, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  const auto &x = need(a, "scalar op");
  at::Tensor r;
  switch (op) {
  case ET_ADD_S: r = x.add(s); break;
  case ET_SUB_S: r = x.sub(s); break;
  case ET_RSUB_S: r = at::rsub(x, s); break;
  case ET_MUL_S: r = x.mul(s); break;
  case ET_DIV_S: r = x.div(s); break;
  case ET_POW_S: r = x.pow(s); break;
  case ET_CLAMP_MIN: r = x.clamp_min(s); break;
  case ET_CLAMP_MAX: r = x.clamp_max(s); break;
  case ET_REMAINDER_S: r = x.remainder(s); break;
  case ET_LT_S: r = x.lt(s); break;
  case ET_GT_S: r = x.gt(s); break;
  case ET_EQ_S: r = x.eq(s); break;
  default: TORCH_CHECK(false, "unknown scalar op ", op);
  }
  *out = wrap(std::move(r));
  ET_CATCH
}

et_error et_reduce(int flags, int op, et_tensor a, const int64_t *dims, int ndims,
                   int keepdim, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  const auto &x = need(a, "reduce");
  std::vector<int64_t> d(dims, dims + ndims);
  bool all = ndims == 0;
  bool kd = keepdim != 0;
  at::Tensor r;
  switch (op) {
  case ET_SUM: r = all ? x.sum() : x.sum(d, kd); break;
  case ET_MEAN: r = all ? x.mean() : x.mean(d, kd); break;
  case ET_AMAX: r = all ? x.max() : x.amax(d, kd); break;
  case ET_AMIN: r = all ? x.min() : x.amin(d, kd); break;
  case ET_VAR_BIASED: r = all ? x.var(false) : at::var(x, at::IntArrayRef(d), false, kd); break;
  case ET_STD_BIASED: r = all ? x.std(false) : at::std(x, at::IntArrayRef(d), false, kd); break;
  case ET_LOGSUMEXP: {
    if (all) {
      std::vector<int64_t> every(x.dim());
      for (int64_t i = 0; i < x.dim(); i++) every[i] = i;
      d = every;
    }
    r = at::logsumexp(x, d, kd);
    break;
  }
  case ET_ARGMAX:
  case ET_ARGMIN: {
    TORCH_CHECK(ndims <= 1, "argmax/argmin take at most one dim");
    c10::optional<int64_t> dim;
    if (!all) dim = d[0];
    r = op == ET_ARGMAX ? at::argmax(x, dim, kd) : at::argmin(x, dim, kd);
    break;
  }
  default: TORCH_CHECK(false, "unknown reduce op ", op);
  }
  *out = wrap(std::move(r));
  ET_CATCH
}

et_error et_dim(int flags, int op, et_tensor a, int64_t dim, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  const auto &x = need(a, "dim op");
  at::Tensor r;
  switch (op) {
  case ET_SOFTMAX: r = at::softmax(x, dim); break;
  case ET_LOG_SOFTMAX: r = at::log_softmax(x, dim); break;
  case ET_UNSQUEEZE: r = x.unsqueeze(dim); break;
  case ET_SQUEEZE: r = x.squeeze(dim); break;
  case ET_CUMSUM: r = x.cumsum(dim); break;
  case ET_FLATTEN_FROM: r = x.flatten(dim); break;
  default: TORCH_CHECK(false, "unknown dim op ", op);
  }
  *out = wrap(std::move(r));
  ET_CATCH
}

et_error et_where(int flags, et_tensor cond, et_tensor a, et_tensor b, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  *out = wrap(at::where(need(cond, "where cond"), need(a, "where a"), need(b, "where b")));
  ET_CATCH
}

et_error et_clamp(int flags, et_tensor a, double lo, double hi, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  *out = wrap(need(a, "clamp").clamp(lo, hi));
  ET_CATCH
}

et_error et_reshape(int flags, et_tensor a, const int64_t *shape, int ndim,
                    et_tensor *out) {
  ET_TRY
  Mode m(flags);
  *out = wrap(need(a, "reshape").reshape(at::IntArrayRef(shape, ndim)));
  ET_CATCH
}

et_error et_expand(int flags, et_tensor a, const int64_t *shape, int ndim,
                   et_tensor *out) {
  ET_TRY
  Mode m(flags);
  *out = wrap(need(a, "expand").expand(at::IntArrayRef(shape, ndim)));
  ET_CATCH
}

et_error et_permute(int flags, et_tensor a, const int64_t *dims, int ndim,
                    et_tensor *out) {
  ET_TRY
  Mode m(flags);
  *out = wrap(need(a, "permute").permute(at::IntArrayRef(dims, ndim)));
  ET_CATCH
}

et_error et_transpose(int flags, et_tensor a, int64_t d0, int64_t d1, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  *out = wrap(need(a, "transpose").transpose(d0, d1));
  ET_CATCH
}

et_error et_narrow(int flags, et_tensor a, int64_t dim, int64_t start, int64_t length,
                   et_tensor *out) {
  ET_TRY
  Mode m(flags);
  *out = wrap(need(a, "narrow").narrow(dim, start, length));
  ET_CATCH
}

et_error et_index_select(int flags, et_tensor a, int64_t dim, et_tensor index,
                         et_tensor *out) {
  ET_TRY
  Mode m(flags);
  *out = wrap(need(a, "index_select").index_select(dim, need(index, "index_select index")));
  ET_CATCH
}

et_error et_index_add(int flags, et_tensor a, int64_t dim, et_tensor index, et_tensor src,
                      et_tensor *out) {
  ET_TRY
  Mode m(flags);
  const at::Tensor &t = need(a, "index_add"), &i = need(index, "index_add index");
  // The CPU kernel checks the indices; the CUDA one asserts on the device, which
  // poisons the whole CUDA context. One sync buys an error instead.
  if (i.is_cuda() && i.numel() > 0) {
    auto [lo, hi] = at::aminmax(i);
    auto both = at::stack({lo, hi}).to(at::kCPU); // one copy, one sync
    int64_t n = t.size(dim), l = both[0].item<int64_t>(), h = both[1].item<int64_t>();
    if (l < 0 || h >= n)
      throw std::runtime_error("index_add: index " + std::to_string(h >= n ? h : l) +
                               " is out of range for dimension " + std::to_string(dim) +
                               " of size " + std::to_string(n));
  }
  *out = wrap(t.index_add(dim, i, need(src, "index_add source")));
  ET_CATCH
}

et_error et_sq_dist(int flags, et_tensor x, et_tensor xsq, et_tensor c, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  const at::Tensor &cs = need(c, "sq_dist centres"), &xs = need(x, "sq_dist");
  const at::Tensor &n = need(xsq, "sq_dist norms");
  // addmm would broadcast norms of another shape into a wrong result.
  TORCH_CHECK(xs.dim() == 2 && n.dim() == 2 && n.size(0) == xs.size(0) && n.size(1) == 1,
              "sq_dist: norms of shape ", n.sizes(), " for rows of shape ", xs.sizes(),
              ", want M×1");
  // In place after addmm: four M×K temporaries made and freed each call cost page
  // faults that took longer than the product, on a table of half a million rows.
  at::Tensor d = at::addmm(n, xs, cs.t(), 1, -2);
  d.add_(cs.square().sum(1).unsqueeze(0)).clamp_min_(0);
  *out = wrap(std::move(d));
  ET_CATCH
}

et_error et_gather(int flags, et_tensor a, int64_t dim, et_tensor index, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  *out = wrap(need(a, "gather").gather(dim, need(index, "gather index")));
  ET_CATCH
}

et_error et_cat(int flags, const et_tensor *ts, int n, int64_t dim, int stack,
                et_tensor *out) {
  ET_TRY
  Mode m(flags);
  std::vector<at::Tensor> v;
  v.reserve(n);
  for (int i = 0; i < n; i++) v.push_back(need(ts[i], "cat"));
  *out = wrap(stack ? at::stack(v, dim) : at::cat(v, dim));
  ET_CATCH
}

et_error et_one_hot(int flags, et_tensor index, int64_t k, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  *out = wrap(at::one_hot(need(index, "one_hot"), k));
  ET_CATCH
}

et_error et_linear(int flags, et_tensor x, et_tensor w, et_tensor b, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  *out = wrap(at::linear(need(x, "linear input"), need(w, "linear weight"), opt(b)));
  ET_CATCH
}

et_error et_conv2d(int flags, et_tensor x, et_tensor w, et_tensor b, int64_t stride,
                   int64_t padding, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  *out = wrap(at::conv2d(need(x, "conv2d input"), need(w, "conv2d weight"), opt(b),
                         {stride, stride}, {padding, padding}));
  ET_CATCH
}

et_error et_max_pool2d(int flags, et_tensor x, int64_t kernel, int64_t stride,
                       et_tensor *out) {
  ET_TRY
  Mode m(flags);
  *out = wrap(at::max_pool2d(need(x, "max_pool2d"), {kernel, kernel}, {stride, stride}));
  ET_CATCH
}

et_error et_batch_norm(int flags, et_tensor x, et_tensor weight, et_tensor bias,
                       et_tensor running_mean, et_tensor running_var, int training,
                       double momentum, double eps, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  *out = wrap(at::batch_norm(need(x, "batch_norm"), opt(weight), opt(bias), opt(running_mean),
                             opt(running_var), training != 0, momentum, eps, true));
  ET_CATCH
}

et_error et_affine_grid(int flags, et_tensor theta, int64_t n, int64_t c, int64_t h,
                        int64_t w, int align_corners, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  *out = wrap(at::affine_grid_generator(need(theta, "affine_grid"), {n, c, h, w},
                                        align_corners != 0));
  ET_CATCH
}

et_error et_grid_sample(int flags, et_tensor x, et_tensor grid, int mode, int padding,
                        int align_corners, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  // libtorch takes any code and returns zeros for one it does not know.
  TORCH_CHECK(mode >= 0 && mode <= 2, "grid_sample: interpolation mode ", mode, " (want 0 to 2)");
  TORCH_CHECK(padding >= 0 && padding <= 2, "grid_sample: padding mode ", padding, " (want 0 to 2)");
  *out = wrap(at::grid_sampler(need(x, "grid_sample input"), need(grid, "grid_sample grid"),
                               mode, padding, align_corners != 0));
  ET_CATCH
}

et_error et_nll_loss(int flags, et_tensor logp, et_tensor target, et_tensor *out) {
  ET_TRY
  Mode m(flags);
  *out = wrap(at::nll_loss(need(logp, "nll_loss input"), need(target, "nll_loss target")));
  ET_CATCH
}

et_error et_copy_(et_tensor dst, et_tensor src) {
  ET_TRY
  c10::NoGradGuard g;
  need(dst, "copy_ dst").copy_(need(src, "copy_ src"));
  ET_CATCH
}

et_error et_uniform_(et_tensor t, double lo, double hi) {
  ET_TRY
  c10::NoGradGuard g;
  need(t, "uniform_").uniform_(lo, hi);
  ET_CATCH
}

et_error et_fill_(et_tensor t, double value) {
  ET_TRY
  c10::NoGradGuard g;
  need(t, "fill_").fill_(value);
  ET_CATCH
}

et_error et_set_requires_grad(et_tensor t, int on) {
  ET_TRY
  need(t, "requires_grad").requires_grad_(on != 0);
  ET_CATCH
}

et_error et_set_data(et_tensor t, et_tensor src) {
  ET_TRY
  auto &x = need(t, "set_data");
  x.set_data(need(src, "set_data"));
  // A gradient of the old layout would be accumulated into as is; drop it.
  if (x.grad().defined()) x.mutable_grad().reset();
  ET_CATCH
}

et_error et_is_channels_last(et_tensor t, int *out) {
  ET_TRY
  const auto &x = need(t, "is_channels_last");
  *out = x.dim() == 4 && x.suggest_memory_format() == at::MemoryFormat::ChannelsLast;
  ET_CATCH
}

et_error et_grad(et_tensor t, et_tensor *out) {
  ET_TRY
  auto g = need(t, "grad").grad();
  *out = g.defined() ? wrap(g) : nullptr;
  ET_CATCH
}

et_error et_backward(et_tensor loss) {
  ET_TRY
  c10::AutoGradMode g(true);
  need(loss, "backward").backward();
  ET_CATCH
}

} // extern "C"

struct et_adam_s {
  std::vector<at::Tensor> params, exp_avg, exp_avg_sq;
  std::vector<double> lr;
  std::vector<int64_t> step;
  double beta1, beta2, eps;
};

namespace {
// The optimiser of a handle; a closed one (Go sets it to nil) is an error, not a fault.
et_adam_s &need_adam(et_adam a) {
  TORCH_CHECK(a != nullptr, "adam: the optimiser was closed");
  return *a;
}

// fusable reports whether one parameter's update can run as adam_cpu's single loop:
// on the CPU, libtorch's _foreach ops are seven passes of one kernel call per
// parameter, and a small network's step spent a third of its time there. The four
// tensors need only be dense with one set of strides, not contiguous: a CNN's
// channels-last weights then line up element for element in memory too.
bool fusable(const at::Tensor &p, const at::Tensor &g, const at::Tensor &m, const at::Tensor &v) {
  auto dt = p.scalar_type();
  if (!p.device().is_cpu() || (dt != at::kFloat && dt != at::kDouble) || p.layout() != at::kStrided ||
      !p.is_non_overlapping_and_dense())
    return false;
  for (const auto *t : {&g, &m, &v}) {
    if (!t->device().is_cpu() || t->scalar_type() != dt || t->layout() != at::kStrided ||
        t->sizes() != p.sizes())
      return false;
    // A dimension of size 1 has any stride (autograd may give a channels-last
    // [32,1,3,3] weight a contiguous gradient): it does not move an element.
    for (int64_t d = 0; d < p.dim(); d++)
      if (p.size(d) > 1 && t->stride(d) != p.stride(d)) return false;
  }
  return true;
}

// adam_span updates n elements in one pass, each element's arithmetic in the same
// order and type (T) as ATen's CPU kernels. It is built vectorised for AVX-512, AVX2
// and the x86-64 baseline by GCC, chosen when the library loads. sqrt and division
// are exact in any width, and fp-contract=off keeps the compiler from fusing
// multiply-adds (GCC's C++ default fused them in the AVX-512 build and moved `make
// run`'s NMI), so each gives the same bits. The build lines pass -ffp-contract=off
// for other compilers and CPUs, and -fno-math-errno, without which sqrt stays scalar.
template <typename T>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) // clang: no clones of templates
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("tree-vectorize", "fp-contract=off")))
#endif
void adam_span(T *__restrict pp, const T *__restrict gp, T *__restrict mp, T *__restrict vp,
               int64_t n, T b1, T a1, T b2, T a2, T e, T ss, T c2) {
  for (int64_t j = 0; j < n; j++) {
    T gj = gp[j];
    T mj = mp[j] * b1 + a1 * gj;
    T vj = vp[j] * b2 + a2 * gj * gj;
    mp[j] = mj;
    vp[j] = vj;
    T root; // not std::sqrt, which is a call the optimize attribute keeps out of line
    if constexpr (sizeof(T) == sizeof(float))
      root = __builtin_sqrtf(vj);
    else
      root = __builtin_sqrt(vj);
    pp[j] = pp[j] + ss * mj / (root / c2 + e);
  }
}

// adam_cpu is _foreach's update of one parameter, in one pass.
template <typename T>
void adam_cpu(at::Tensor &p, const at::Tensor &g, at::Tensor &m, at::Tensor &v, double beta1,
              double beta2, double eps, double step_size, double bc2_sqrt) {
  T *pp = p.data_ptr<T>(), *mp = m.data_ptr<T>(), *vp = v.data_ptr<T>();
  const T *gp = g.data_ptr<T>();
  at::parallel_for(0, p.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
    adam_span<T>(pp + begin, gp + begin, mp + begin, vp + begin, end - begin, beta1, 1 - beta1,
                 beta2, 1 - beta2, eps, step_size, bc2_sqrt);
  });
  // As an in-place op would: a graph saved before the step then refuses to backward.
  p.unsafeGetTensorImpl()->bump_version();
}
} // namespace

extern "C" {

et_error et_adam_new(const et_tensor *params, const double *lrs, int n, double beta1,
                     double beta2, double eps, et_adam *out) {
  ET_TRY
  auto a = std::make_unique<et_adam_s>(); // freed if a zeros_like below throws
  a->beta1 = beta1;
  a->beta2 = beta2;
  a->eps = eps;
  for (int i = 0; i < n; i++) {
    const auto &p = need(params[i], "adam param");
    a->params.push_back(p);
    a->lr.push_back(lrs[i]);
    a->exp_avg.push_back(at::zeros_like(p));
    a->exp_avg_sq.push_back(at::zeros_like(p));
    a->step.push_back(0);
  }
  *out = a.release();
  ET_CATCH
}

et_error et_adam_free(et_adam a) {
  ET_TRY
  delete a;
  ET_CATCH
}

et_error et_adam_zero_grad(et_adam a) {
  ET_TRY
  for (auto &p : need_adam(a).params) p.mutable_grad().reset();
  ET_CATCH
}

// The update is torch.optim.Adam's (amsgrad off, no weight decay), written out so that
// its state is plain tensors we can checkpoint. Parameters that share a learning rate
// and a step count update together through the _foreach ops, as torch.optim.Adam's
// default does: on CUDA each op is a few multi-tensor kernels instead of one kernel a
// parameter (a CNN's step launched ~350 more kernels before). On the CPU, dense
// float parameters take adam_cpu's single pass instead.
et_error et_adam_step(et_adam a) {
  ET_TRY
  need_adam(a);
  c10::NoGradGuard g;
  struct group {
    double lr;
    int64_t step; // after this update
    std::vector<size_t> index;
    std::vector<at::Tensor> params, grads, exp_avg, exp_avg_sq;
  };
  std::vector<group> groups;
  for (size_t i = 0; i < a->params.size(); i++) {
    auto &p = a->params[i];
    const auto &grad = p.grad();
    if (!grad.defined()) continue;
    int64_t step = a->step[i] + 1;
    group *gr = nullptr;
    for (auto &x : groups)
      if (x.lr == a->lr[i] && x.step == step) gr = &x;
    if (!gr) {
      groups.push_back(group{a->lr[i], step, {}, {}, {}, {}, {}});
      gr = &groups.back();
    }
    gr->index.push_back(i);
    gr->params.push_back(p);
    gr->grads.push_back(grad);
    gr->exp_avg.push_back(a->exp_avg[i]);
    gr->exp_avg_sq.push_back(a->exp_avg_sq[i]);
  }
  for (auto &gr : groups) {
    double bc1 = 1 - std::pow(a->beta1, static_cast<double>(gr.step));
    double bc2 = 1 - std::pow(a->beta2, static_cast<double>(gr.step));
    // Each parameter that adam_cpu can take runs there; the rest go through _foreach,
    // first, as only they allocate (and so may throw).
    std::vector<size_t> fused;
    std::vector<at::Tensor> params, grads, exp_avg, exp_avg_sq;
    for (size_t j = 0; j < gr.params.size(); j++) {
      if (fusable(gr.params[j], gr.grads[j], gr.exp_avg[j], gr.exp_avg_sq[j])) {
        fused.push_back(j);
        continue;
      }
      params.push_back(gr.params[j]);
      grads.push_back(gr.grads[j]);
      exp_avg.push_back(gr.exp_avg[j]);
      exp_avg_sq.push_back(gr.exp_avg_sq[j]);
    }
    if (!params.empty()) {
      at::_foreach_mul_(exp_avg, a->beta1);
      at::_foreach_add_(exp_avg, grads, 1 - a->beta1);
      at::_foreach_mul_(exp_avg_sq, a->beta2);
      at::_foreach_addcmul_(exp_avg_sq, grads, grads, 1 - a->beta2);
      auto denom = at::_foreach_sqrt(exp_avg_sq);
      at::_foreach_div_(denom, std::sqrt(bc2));
      at::_foreach_add_(denom, a->eps);
      at::_foreach_addcdiv_(params, exp_avg, denom, -gr.lr / bc1);
    }
    for (size_t j : fused) {
      AT_DISPATCH_FLOATING_TYPES(gr.params[j].scalar_type(), "adam_cpu", [&] {
        adam_cpu<scalar_t>(gr.params[j], gr.grads[j], gr.exp_avg[j], gr.exp_avg_sq[j], a->beta1,
                           a->beta2, a->eps, -gr.lr / bc1, std::sqrt(bc2));
      });
    }
    // Counted once the group's update went through: an op that throws (out of
    // memory) leaves the steps where the parameters are.
    for (size_t i : gr.index) a->step[i] = gr.step;
  }
  ET_CATCH
}

et_error et_adam_get_state(et_adam a, int i, et_tensor *exp_avg, et_tensor *exp_avg_sq,
                           int64_t *step) {
  ET_TRY
  TORCH_CHECK(i >= 0 && i < static_cast<int>(need_adam(a).params.size()), "adam: no parameter ", i);
  et_tensor m = wrap(a->exp_avg[i]);
  try {
    *exp_avg_sq = wrap(a->exp_avg_sq[i]);
  } catch (...) {
    unwrap_free(m);
    throw;
  }
  *exp_avg = m;
  *step = a->step[i];
  ET_CATCH
}

et_error et_adam_set_state(et_adam a, int i, et_tensor exp_avg, et_tensor exp_avg_sq,
                           int64_t step) {
  ET_TRY
  TORCH_CHECK(i >= 0 && i < static_cast<int>(need_adam(a).params.size()), "adam: no parameter ", i);
  // copy_ would broadcast and cast a state of another shape or dtype without a word,
  // and a negative step makes the bias correction divide by zero.
  TORCH_CHECK(step >= 0, "adam: parameter ", i, ": step ", step, " is negative");
  const auto &m = need(exp_avg, "adam exp_avg"), &v = need(exp_avg_sq, "adam exp_avg_sq");
  for (const auto *t : {&m, &v}) {
    TORCH_CHECK(t->sizes() == a->exp_avg[i].sizes() && t->scalar_type() == a->exp_avg[i].scalar_type(),
                "adam: parameter ", i, ": a state of ", t->sizes(), " ", t->scalar_type(), " for one of ",
                a->exp_avg[i].sizes(), " ", a->exp_avg[i].scalar_type());
  }
  c10::NoGradGuard g;
  a->exp_avg[i].copy_(m);
  a->exp_avg_sq[i].copy_(v);
  a->step[i] = step;
  ET_CATCH
}

et_error et_manual_seed(uint64_t seed) {
  ET_TRY
  at::manual_seed(seed);
  ET_CATCH
}

// OpenBLAS keeps a thread count and a pool of its own, which at::set_num_threads
// leaves alone (it sets MKL's). Looked up, not linked: other builds carry MKL.
static void *openblas_symbol(const char *name) {
#if defined(__linux__)
  return dlsym(RTLD_DEFAULT, name);
#else
  (void)name;
  return nullptr;
#endif
}

// set_openblas sets OpenBLAS's thread count, where OpenBLAS is loaded.
static void set_openblas(int n) {
  // Its setter is not safe to call from two threads at once (OpenMP builds resize
  // buffers without a lock), and restarts side by side each set one thread.
  using set_fn = void (*)(int);
  static const auto set_blas = reinterpret_cast<set_fn>(openblas_symbol("openblas_set_num_threads"));
  static std::mutex blas_lock;
  if (set_blas != nullptr) {
    std::lock_guard<std::mutex> hold(blas_lock);
    if (et_get_blas_threads() != n) {
      set_blas(n);
    }
  }
}

et_error et_set_blas_threads(int n) {
  ET_TRY
  TORCH_CHECK(n >= 1, "set_blas_threads: ", n, " threads");
  // Only the pthreads build (openblas_get_parallel() == 1) keeps a pool of its own:
  // the OpenMP build's setter sets the calling thread's OpenMP count, libtorch's too.
  using parallel_fn = int (*)(void);
  static const auto parallel = reinterpret_cast<parallel_fn>(openblas_symbol("openblas_get_parallel"));
  if (parallel != nullptr && parallel() == 1) set_openblas(n);
  ET_CATCH
}

et_error et_set_num_threads(int n) {
  ET_TRY
  at::set_num_threads(n);
  // OpenBLAS's threads spin for a while after each call they share, on the cores the
  // caller meant to keep to n threads.
  set_openblas(n);
  ET_CATCH
}

int et_get_blas_threads(void) {
  using get_fn = int (*)(void);
  static const auto get_blas = reinterpret_cast<get_fn>(openblas_symbol("openblas_get_num_threads"));
  return get_blas != nullptr ? get_blas() : -1;
}

int et_get_num_threads(void) { return at::get_num_threads(); }

int et_cuda_available(void) {
  try {
    return at::globalContext().hasCUDA() && at::detail::getCUDAHooks().getNumGPUs() > 0;
  } catch (...) {
    return 0;
  }
}

int et_cuda_device_count(void) {
  try {
    return at::detail::getCUDAHooks().getNumGPUs();
  } catch (...) {
    return 0;
  }
}

et_error et_cuda_synchronize(int device_index) {
  ET_TRY
#ifdef EMTORCH_CUDA
  c10::cuda::CUDAGuard g(static_cast<c10::DeviceIndex>(device_index));
  auto err = cudaDeviceSynchronize();
  TORCH_CHECK(err == cudaSuccess, "cudaDeviceSynchronize: ", cudaGetErrorString(err));
#else
  (void)device_index;
#endif
  ET_CATCH
}

et_error et_cuda_device_info(int device_index, char *name, int cap, int64_t *total_mem) {
  ET_TRY
#ifdef EMTORCH_CUDA
  cudaDeviceProp prop;
  auto err = cudaGetDeviceProperties(&prop, device_index);
  TORCH_CHECK(err == cudaSuccess, "cudaGetDeviceProperties: ", cudaGetErrorString(err));
  std::snprintf(name, cap, "%s", prop.name);
  *total_mem = static_cast<int64_t>(prop.totalGlobalMem);
#else
  (void)device_index;
  (void)name;
  (void)cap;
  (void)total_mem;
  TORCH_CHECK(false, "this emtorch shim was built without CUDA");
#endif
  ET_CATCH
}

int64_t et_cuda_max_memory_allocated(int device_index) {
#ifdef EMTORCH_CUDA
  try {
    // Index 0 is the aggregate over pools; the StatType enum that names it moved
    // namespace across libtorch versions, the layout did not.
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_index);
    return stats.allocated_bytes[0].peak;
  } catch (...) {
    return -1;
  }
#else
  (void)device_index;
  return -1;
#endif
}

et_error et_cuda_reset_peak_memory(int device_index) {
  ET_TRY
#ifdef EMTORCH_CUDA
  c10::cuda::CUDACachingAllocator::resetPeakStats(device_index);
#else
  (void)device_index;
#endif
  ET_CATCH
}

void et_set_cudnn_benchmark(int on) { at::globalContext().setBenchmarkCuDNN(on != 0); }

void et_set_cudnn_deterministic(int on) { at::globalContext().setDeterministicCuDNN(on != 0); }

int et_advise_huge_pages(void) {
#if defined(__linux__)
  // Never freed: libtorch holds the pointer for the rest of the process. No exception
  // may cross into Go, and advice that fails leaves the default allocator.
  try {
    static HugePageAllocator *alloc = new HugePageAllocator(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(alloc, /*priority=*/1);
    return 1;
  } catch (...) {
    return 0;
  }
#else
  return 0;
#endif
}

int et_keep_freed_memory(void) {
#if defined(__GLIBC__)
  // mallopt takes an int: 2 GiB is the largest trim threshold it can set.
  return mallopt(M_MMAP_MAX, 0) && mallopt(M_TRIM_THRESHOLD, INT_MAX);
#else
  return 0;
#endif
}

const char *et_version(void) { return TORCH_VERSION; }

int et_built_with_cuda(void) {
#ifdef EMTORCH_CUDA
  return 1;
#else
  return 0;
#endif
}

} // extern "C"

// ---- process groups ------------------------------------------------------------------

struct et_group_s {
#ifdef EMTORCH_DIST
  // libtorch 2 split the collectives' implementations (Backend) from ProcessGroup;
  // ProcessGroupGloo and ProcessGroupNCCL derive from whichever holds them.
#if TORCH_VERSION_MAJOR >= 2
  using Impl = c10d::Backend;
#else
  using Impl = c10d::ProcessGroup;
#endif
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<Impl> pg;
  std::chrono::milliseconds timeout{0};
#endif
  int rank = 0, world = 1;
  at::Device device{at::kCPU}; // where the backend's tensors live: NCCL's on the GPU
  int64_t id = 0;              // its key in live_groups
};

namespace {

// The group of a handle; a closed one (Go sets it to nil) is an error, not a fault.
[[maybe_unused]] et_group_s &need_group(et_group g) {
  TORCH_CHECK(g != nullptr, "group: the process group was closed");
  return *g;
}

#ifdef EMTORCH_DIST
// The open groups by id. AllReduceSum's graph keeps a group's id, not its pointer:
// a backward after the group was closed is then an error, not a use after free.
std::mutex live_groups_mu;
std::unordered_map<int64_t, et_group> live_groups;
int64_t next_group_id = 1;

et_group open_group(int64_t id) {
  std::lock_guard<std::mutex> lock(live_groups_mu);
  auto it = live_groups.find(id);
  TORCH_CHECK(it != live_groups.end(), "all_reduce_sum backward: the process group was closed");
  return it->second;
}

void all_reduce(et_group g, at::Tensor &flat) {
  need_group(g);
  std::vector<at::Tensor> v{flat};
  g->pg->allreduce(v)->wait(g->timeout);
}

// Same dtype and device for all: one buffer, one collective.
at::Tensor flatten(const std::vector<at::Tensor> &ts) {
  std::vector<at::Tensor> flat;
  for (const auto &t : ts) {
    TORCH_CHECK(t.scalar_type() == ts[0].scalar_type() && t.device() == ts[0].device(),
                "collective over tensors of different dtypes or devices");
    flat.push_back(t.reshape(-1));
  }
  return at::cat(flat);
}

void unflatten(const at::Tensor &flat, std::vector<at::Tensor> &ts) {
  int64_t off = 0;
  for (auto &t : ts) {
    t.copy_(flat.narrow(0, off, t.numel()).view_as(t));
    off += t.numel();
  }
}

// AllReduceSum is the sum over ranks, whose gradient is again the sum over ranks of
// the incoming gradients: each rank's loss reaches every rank's inputs through it.
struct AllReduceSum : public torch::autograd::Function<AllReduceSum> {
  static at::Tensor forward(torch::autograd::AutogradContext *ctx, const at::Tensor &x,
                            int64_t group) {
    auto g = reinterpret_cast<et_group>(group);
    ctx->saved_data["group"] = need_group(g).id;
    auto y = x.detach().contiguous().clone();
    all_reduce(g, y);
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx,
                                                 torch::autograd::variable_list grads) {
    auto g = open_group(ctx->saved_data["group"].toInt());
    auto y = grads[0].contiguous().clone();
    all_reduce(g, y);
    return {y, at::Tensor()};
  }
};

at::Tensor sync_batch_norm(et_group g, const at::Tensor &x, const at::Tensor &w,
                           const at::Tensor &b, const at::Tensor &running_mean,
                           const at::Tensor &running_var, double momentum, double eps) {
  TORCH_CHECK(x.dim() >= 2, "sync_batch_norm: want N×C or N×C×…, got ", x.dim(), " dims");
  const int64_t c = x.size(1);
  TORCH_CHECK(c > 0, "sync_batch_norm: no channels");
  std::vector<int64_t> dims{0}, shape(x.dim(), 1);
  for (int64_t d = 2; d < x.dim(); d++) dims.push_back(d);
  shape[1] = c;
  // Statistics in at least float32, as at::batch_norm keeps them for bf16 input.
  bool low = x.scalar_type() != at::kFloat && x.scalar_type() != at::kDouble;
  at::Tensor xf = low ? x.to(at::kFloat) : x;
  // Each rank's mean and centred sum of squares, combined as Chan et al. do: Σx and
  // Σx² would lose the variance in float32 where the mean is far from 0 (a raw year
  // column). Every rank fills its own row of a world × 2C tensor, so one sum over the
  // ranks gathers all rows, and AllReduceSum's backward differentiates the gather.
  // Ranks hold as many rows each (training cuts the batch to a multiple of them).
  const int64_t n = x.numel() / c;
  const double count = double(n) * g->world;
  TORCH_CHECK(count > 1, "sync_batch_norm: ", count, " values per channel over all ranks");
  // The sums accumulate in double, as libtorch's own CPU batch norm does (its acc_type):
  // in float the ranks drifted four times as far from one process under libtorch 2.6.
  const auto ft = xf.scalar_type();
  at::Tensor local_mean = xf.sum(dims, false, at::kDouble) / double(n);
  at::Tensor local_m2 = (xf - local_mean.to(ft).view(shape)).square().sum(dims, false, at::kDouble);
  at::Tensor row = at::cat({local_mean, local_m2}).unsqueeze(0);
  at::Tensor rows = at::constant_pad_nd(row, {0, 0, g->rank, g->world - 1 - g->rank});
  at::Tensor all = AllReduceSum::apply(rows, reinterpret_cast<int64_t>(g));
  at::Tensor means = all.narrow(1, 0, c), m2s = all.narrow(1, c, c);
  at::Tensor mean_d = means.mean(0);
  at::Tensor var_d = (m2s.sum(0) + (means - mean_d).square().sum(0) * double(n)) / count;
  at::Tensor mean = mean_d.to(ft), var = var_d.to(ft);
  // y = x·scale + shift per channel, in one elementwise pass that saves only x and
  // scale for backward, as libtorch's CPU batch norm folds it.
  at::Tensor scale = (var + eps).rsqrt();
  if (w.defined()) scale = scale * w;
  at::Tensor shift = -mean * scale;
  if (b.defined()) shift = shift + b;
  at::Tensor y = at::addcmul(shift.view(shape), xf, scale.view(shape));
  {
    c10::NoGradGuard ng;
    if (running_mean.defined())
      running_mean.mul_(1 - momentum).add_(mean.detach().to(running_mean.scalar_type()), momentum);
    if (running_var.defined()) // unbiased, as at::batch_norm's running variance
      running_var.mul_(1 - momentum)
          .add_((var.detach() * (count / (count - 1))).to(running_var.scalar_type()), momentum);
  }
  return low ? y.to(x.scalar_type()) : y;
}

#ifdef EMTORCH_GLOO
// Gloo from 2025 on (Ubuntu 26.04's and Debian forky's libgloo0, beside libtorch 2.9
// and 2.14) writes a line per group on std::cerr as it connects,
// "[./gloo/transport/tcp/context.cc:243] INFO Rank 0 is
// connected to 1. ...": GLOO_INFO is a plain write of the whole line, with no level to
// set before GLOO_LOG_LEVEL (late 2025). This stream buffer in front of std::cerr's
// drops Gloo's INFO lines and passes everything else through unchanged, unbuffered.
class drop_gloo_info : public std::streambuf {
 public:
  explicit drop_gloo_info(std::streambuf *out) : out_(out) {}

 protected:
  int overflow(int c) override {
    return traits_type::eq_int_type(c, traits_type::eof()) ? traits_type::not_eof(c) : out_->sputc(traits_type::to_char_type(c));
  }
  std::streamsize xsputn(const char *s, std::streamsize n) override {
    std::string_view line(s, static_cast<size_t>(n));
    size_t info = line.find("] INFO ");
    if (!line.empty() && line[0] == '[' && info != std::string_view::npos &&
        line.substr(0, info).find("gloo/") != std::string_view::npos && line.find('\n') == static_cast<size_t>(n) - 1)
      return n;
    return out_->sputn(s, n);
  }
  int sync() override { return out_->pubsync(); }

 private:
  std::streambuf *out_;
};
#endif

// c10d reports a socket failure twice: in the exception its caller turns into one
// line, and in log lines on stderr (with backtraces, in 2.x). From the first group on,
// keep libtorch's log to fatal messages: c10's own level, and glog's where libtorch
// logs through glog (Debian's 1.13), which c10's level does not reach once set up;
// and Gloo's INFO lines off std::cerr.
// Once: groups are made on several threads at a time (the tests' ranks).
void quiet_logs() {
  static std::once_flag once;
  std::call_once(once, [] {
    FLAGS_caffe2_log_level = 3; // c10 declares its flags in the global namespace
#if defined(__linux__)
    if (auto *level = static_cast<int *>(dlsym(RTLD_DEFAULT, "_ZN3fLI17FLAGS_minloglevelE")))
      *level = 3;
#endif
#ifdef EMTORCH_GLOO
    // Never freed: std::cerr outlives this library's static objects. A user's
    // GLOO_LOG_LEVEL is Gloo's to honour. Set before any rank's group connects;
    // nothing of emclust's writes to std::cerr meanwhile.
    if (!std::getenv("GLOO_LOG_LEVEL"))
      std::cerr.rdbuf(new drop_gloo_info(std::cerr.rdbuf()));
#endif
  });
}

std::vector<at::Tensor> tensors(const et_tensor *ts, int n, const char *what) {
  std::vector<at::Tensor> v;
  for (int i = 0; i < n; i++) v.push_back(need(ts[i], what));
  return v;
}
#endif

#define ET_NEED_DIST TORCH_CHECK(false, "this emtorch shim was built without Gloo or NCCL")

} // namespace

extern "C" {

int et_dist_backends(void) {
  int b = 0;
#ifdef EMTORCH_GLOO
  b |= 1;
#endif
#ifdef EMTORCH_NCCL
  b |= 2;
#endif
  return b;
}

#ifdef EMTORCH_DIST
namespace {
c10d::TCPStoreOptions store_options(int port, bool serve, int world, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(port);
  so.isServer = serve;
  so.numWorkers = world;
  so.waitWorkers = false; // a group's own rendezvous waits, with the timeout
  so.timeout = timeout;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  so.useLibUV = false; // a libuv store is not in every build; the classic one is
#endif
  return so;
}
} // namespace
#endif

et_error et_group_new(int backend, const char *host, int port, int serve_store,
                      const char *prefix, int rank, int world, int64_t timeout_ms,
                      const char *iface, int device_index, et_group *out) {
  ET_TRY
#ifdef EMTORCH_DIST
  quiet_logs();
  TORCH_CHECK(world >= 1 && rank >= 0 && rank < world, "rank ", rank, " of world size ", world);
  // Port 0 serves on a free port, which only a world of one can find.
  TORCH_CHECK((port > 0 || (port == 0 && serve_store)) && port < 65536, "port ", port, " out of range");
  auto g = std::make_unique<et_group_s>();
  g->rank = rank;
  g->world = world;
  g->timeout = std::chrono::milliseconds(timeout_ms);
  auto tcp = c10::make_intrusive<c10d::TCPStore>(std::string(host), store_options(port, serve_store != 0, world, g->timeout));
  g->store = c10::make_intrusive<c10d::PrefixStore>(std::string(prefix), tcp);
  if (backend == ET_GLOO) {
#ifdef EMTORCH_GLOO
    auto opts = c10d::ProcessGroupGloo::Options::create(g->timeout);
    if (iface != nullptr && iface[0] != 0)
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(iface));
    else
      opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    g->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("gloo", g->store), rank, world, opts);
#else
    TORCH_CHECK(false, "this emtorch shim was built without Gloo");
#endif
  } else if (backend == ET_NCCL) {
#ifdef EMTORCH_NCCL
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_index));
    g->device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_index));
    // On an error or a timeout, libtorch 2.x's watchdog takes the whole process down
    // by default ("terminate called"). Aborting the communicators alone makes the
    // next collective fail, which reaches Go as an error (a user's setting stands).
    // Unmeasured: the lends have one GPU, and NCCL refuses two ranks on one. Once,
    // as setenv races getenv on other threads; libtorch also reads the older name.
    static std::once_flag nccl_env;
    std::call_once(nccl_env, [] {
      if (getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING") == nullptr && getenv("NCCL_ASYNC_ERROR_HANDLING") == nullptr)
        setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2", /*overwrite=*/0);
    });
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = g->timeout;
    g->pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(
        c10::make_intrusive<c10d::PrefixStore>("nccl", g->store), rank, world, opts);
#else
    TORCH_CHECK(false, "this emtorch shim was built without NCCL");
#endif
  } else {
    TORCH_CHECK(false, "unknown backend code ", backend);
  }
  {
    std::lock_guard<std::mutex> lock(live_groups_mu);
    g->id = next_group_id++;
    live_groups.emplace(g->id, g.get());
  }
  *out = g.release();
#else
  ET_NEED_DIST;
#endif
  ET_CATCH
}

et_error et_group_free(et_group g) {
  ET_TRY
#ifdef EMTORCH_DIST
  if (g != nullptr) {
    std::lock_guard<std::mutex> lock(live_groups_mu);
    live_groups.erase(g->id);
  }
#endif
  delete g;
  ET_CATCH
}

struct et_store_s {
#ifdef EMTORCH_DIST
  c10::intrusive_ptr<c10d::TCPStore> store;
#endif
};

et_error et_store_serve(const char *host, int port, int world, int64_t timeout_ms,
                        et_store *out, int *bound_port) {
  ET_TRY
#ifdef EMTORCH_DIST
  quiet_logs();
  TORCH_CHECK(world >= 1, "world size ", world);
  TORCH_CHECK(port >= 0 && port < 65536, "port ", port, " out of range");
  TORCH_CHECK(timeout_ms >= 1, "timeout ", timeout_ms, " ms");
  auto s = std::make_unique<et_store_s>();
  s->store = c10::make_intrusive<c10d::TCPStore>(
      std::string(host), store_options(port, true, world, std::chrono::milliseconds(timeout_ms)));
  *bound_port = s->store->getPort();
  *out = s.release();
#else
  ET_NEED_DIST;
#endif
  ET_CATCH
}

et_error et_store_free(et_store s) {
  ET_TRY
  delete s;
  ET_CATCH
}

et_error et_group_all_reduce(et_group g, const et_tensor *ts, int n) {
  ET_TRY
#ifdef EMTORCH_DIST
  if (n == 0) return nullptr;
  c10::NoGradGuard ng;
  auto v = tensors(ts, n, "all_reduce");
  at::Tensor flat = flatten(v);
  all_reduce(g, flat);
  unflatten(flat, v);
#else
  ET_NEED_DIST;
#endif
  ET_CATCH
}

et_error et_group_reduce_grads(et_group g, const et_tensor *params, int n, double scale) {
  ET_TRY
#ifdef EMTORCH_DIST
  c10::NoGradGuard ng;
  need_group(g);
  if (n == 0) return nullptr;
  // Every rank must send the same buffer, or one waits for a collective the others
  // skipped: a parameter without a gradient here takes part as zeros, and a count of
  // the ranks that had one rides along. One that none had keeps none, as in one
  // process, where Adam then leaves it alone.
  std::vector<at::Tensor> grads;
  std::vector<bool> had(n);
  for (int i = 0; i < n; i++) {
    auto &p = need(params[i], "reduce_grads");
    had[i] = p.grad().defined();
    // Zeros of its own: p takes a gradient only once the all-reduce has succeeded,
    // not the zeros a failed one would leave (which Adam would then step on).
    grads.push_back(had[i] ? p.grad() : at::zeros_like(p));
  }
  // Training gives every parameter a gradient on every rank: then the count is one
  // fill, and nothing is read back (which would wait for the device each step).
  const bool all = std::all_of(had.begin(), had.end(), [](bool h) { return h; });
  at::Tensor count = at::ones({n}, grads[0].options());
  if (!all) {
    std::vector<float> c(had.begin(), had.end());
    count = at::tensor(c).to(grads[0].options());
  }
  grads.push_back(count);
  at::Tensor flat = flatten(grads);
  all_reduce(g, flat);
  grads.pop_back();
  if (scale != 1) flat.mul_(scale);
  unflatten(flat, grads);
  if (!all) {
    at::Tensor counted = flat.narrow(0, flat.numel() - n, n).to(at::kCPU, at::kFloat);
    for (int i = 0; i < n; i++)
      if (!had[i] && counted[i].item<float>() != 0) need(params[i], "reduce_grads").mutable_grad() = grads[i];
  }
#else
  ET_NEED_DIST;
#endif
  ET_CATCH
}

et_error et_group_broadcast(et_group g, const et_tensor *ts, int n, int root) {
  ET_TRY
#ifdef EMTORCH_DIST
  if (n == 0) return nullptr;
  c10::NoGradGuard ng;
  auto v = tensors(ts, n, "broadcast");
  std::vector<at::Tensor> flat{flatten(v)};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  need_group(g).pg->broadcast(flat, o)->wait(g->timeout);
  unflatten(flat[0], v);
#else
  ET_NEED_DIST;
#endif
  ET_CATCH
}

et_error et_group_barrier(et_group g) {
  ET_TRY
#ifdef EMTORCH_DIST
  // A one-element all-reduce, bounded by the group's timeout as every collective here.
  at::Tensor one = at::ones({1}, at::TensorOptions().device(need_group(g).device));
  all_reduce(g, one);
#else
  ET_NEED_DIST;
#endif
  ET_CATCH
}

et_error et_group_store_set(et_group g, const char *key, const char *value) {
  ET_TRY
#ifdef EMTORCH_DIST
  std::string v(value);
  need_group(g).store->set(key, std::vector<uint8_t>(v.begin(), v.end()));
#else
  ET_NEED_DIST;
#endif
  ET_CATCH
}

et_error et_group_store_get(et_group g, const char *key, char **value) {
  ET_TRY
#ifdef EMTORCH_DIST
  need_group(g).store->wait({key}, g->timeout);
  auto v = g->store->get(key);
  std::string s(v.begin(), v.end());
  *value = strdup(s.c_str());
  if (*value == nullptr) throw std::bad_alloc();
#else
  ET_NEED_DIST;
#endif
  ET_CATCH
}

et_error et_group_store_check(et_group g, const char *key, int *found) {
  ET_TRY
#ifdef EMTORCH_DIST
  *found = need_group(g).store->check({key}) ? 1 : 0;
#else
  ET_NEED_DIST;
#endif
  ET_CATCH
}

et_error et_all_reduce_sum(int flags, et_group g, et_tensor x, et_tensor *out) {
  ET_TRY
#ifdef EMTORCH_DIST
  Mode m(flags);
  need_group(g);
  *out = wrap(AllReduceSum::apply(need(x, "all_reduce_sum"), reinterpret_cast<int64_t>(g)));
#else
  ET_NEED_DIST;
#endif
  ET_CATCH
}

et_error et_sync_batch_norm(int flags, et_group g, et_tensor x, et_tensor weight,
                            et_tensor bias, et_tensor running_mean, et_tensor running_var,
                            double momentum, double eps, et_tensor *out) {
  ET_TRY
#ifdef EMTORCH_DIST
  Mode m(flags);
  need_group(g);
  *out = wrap(sync_batch_norm(g, need(x, "sync_batch_norm"), opt(weight), opt(bias),
                              opt(running_mean), opt(running_var), momentum, eps));
#else
  ET_NEED_DIST;
#endif
  ET_CATCH
}

} // extern "C"
