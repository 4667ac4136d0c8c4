// libtstor-torch: any tstor device type as PyTorch 1.13's PrivateUse1 device.
//
// torch.ops.load_library("libtstor-torch.so") registers, for the device type
// TSTOR_TORCH_DEVICE names (default: hpu when loaded, else the first type that
// is neither host memory nor metadata only):
//   - the allocator: a DataPtr whose context is a tstor storage on the device
//     and whose deleter releases it, so every byte PyTorch holds is tstor's;
//   - the device guard: device count, current device, one stream per device
//     (tstor's default stream);
//   - the kernels PyTorch needs to hold tensors there (empty, empty_strided,
//     as_strided, view, _reshape_alias, resize_, _copy_from,
//     _copy_from_and_resize, fill_, zero_, _local_scalar_dense, set_); every
//     other operator runs through PyTorch's cpu fallback, which copies the
//     operands to the cpu and back with _copy_from.
// torch.ops.tstor.device_type() names the tstor type, and
// torch.ops.tstor.memory_allocated(i) gives the bytes tstor's storages hold on
// device i, as torch.cuda.memory_allocated does.
// Copies and fills are tstor's (tstor_tensor_copy_, tstor_tensor_fill): strided,
// converting, between any two devices, never touching device bytes from the
// host. Errors surface as Python RuntimeErrors carrying tstor's message.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <tstor/tensor.h>
#include <tstor/tstor.h>

#include <cstdlib>
#include <memory>
#include <cstring>
#include <string>

namespace {

// ------------------------------------------------------------------ state

// The tstor device type behind PrivateUse1, found once, on first use: the
// default context opens as everywhere (TSTOR_CONFIG, the installed config, the
// embedded default). A failure is kept and raised on every use.
struct Backend {
  int type = -1;
  int count = 0;
  std::string name;
  std::string error;
};

Backend find_backend() {
  Backend b;
  int ntypes = tstor_device_type_count(nullptr);
  if (ntypes < 0) {
    b.error = std::string("cannot open the tstor context: ") + tstor_last_error();
    return b;
  }
  const char *want = std::getenv("TSTOR_TORCH_DEVICE");
  for (int t = 0; t < ntypes; t++) {
    const char *n = tstor_device_type_name(nullptr, t);
    if (!n) continue;
    bool pick = want && *want ? std::strcmp(n, want) == 0
                              : std::strcmp(n, "hpu") == 0;
    if (pick) b.type = t;
  }
  if (b.type < 0 && !(want && *want)) // no hpu: the first device with bytes of its own
    for (int t = 0; t < ntypes && b.type < 0; t++)
      if (!(tstor_device_type_flags(nullptr, t) & (TSTOR_DEVICE_HOST | TSTOR_DEVICE_NO_DATA)))
        b.type = t;
  if (b.type < 0) {
    std::string types;
    for (int t = 0; t < ntypes; t++) {
      const char *n = tstor_device_type_name(nullptr, t);
      types += std::string(t ? ", " : "") + (n ? n : "?");
    }
    b.error = want && *want ? "TSTOR_TORCH_DEVICE=" + std::string(want) +
                                  ": no such device type in this tstor context (it has " + types + ")"
                            : "no tstor device type to stand for PrivateUse1 (this context has " +
                                  types + "; set TSTOR_TORCH_DEVICE)";
    return b;
  }
  if (tstor_device_type_flags(nullptr, b.type) & (TSTOR_DEVICE_HOST | TSTOR_DEVICE_NO_DATA)) {
    b.error = std::string("tstor device type '") + tstor_device_type_name(nullptr, b.type) +
              "' is host memory or has no data: PrivateUse1 needs a device of its own";
    b.type = -1;
    return b;
  }
  b.name = tstor_device_type_name(nullptr, b.type);
  b.count = tstor_device_count(nullptr, b.type);
  if (b.count <= 0) {
    b.error = "tstor device type '" + b.name + "' has no devices";
    b.type = -1;
  }
  return b;
}

const Backend &backend() {
  static const Backend b = find_backend();
  TORCH_CHECK(b.type >= 0, "tstor: ", b.error);
  return b;
}

thread_local c10::DeviceIndex current_index = 0;

tstor_device tstor_dev(c10::DeviceIndex index) {
  const Backend &b = backend();
  TORCH_CHECK(index >= 0 && index < b.count, "tstor: ", b.name, ":", int(index),
              " does not exist (", b.count, " device", b.count == 1 ? "" : "s", ")");
  return tstor_device{b.type, index};
}

tstor_device cpu_dev() {
  tstor_device d;
  int rc = tstor_device_parse(nullptr, "cpu", &d);
  TORCH_CHECK(rc == 0, "tstor: ", tstor_last_error());
  return d;
}

void check(int rc, const char *what) {
  TORCH_CHECK(rc == 0, "tstor: ", what, ": ", tstor_last_error(), " (", tstor_err_name(rc), ")");
}

// ------------------------------------------------------------- allocator

void release_storage(void *ctx) { tstor_storage_release(static_cast<tstor_storage *>(ctx)); }

struct TstorAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) const override {
    c10::DeviceIndex index = current_index;
    tstor_storage *s = nullptr;
    check(tstor_storage_new(nullptr, tstor_dev(index), nbytes, &s), "allocating device memory");
    return {tstor_storage_data(s), s, &release_storage,
            c10::Device(c10::DeviceType::PrivateUse1, index)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
};

TstorAllocator allocator;

// ------------------------------------------------------------ device guard

struct TstorGuard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override {
    return c10::Device(c10::DeviceType::PrivateUse1, current_index);
  }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == c10::DeviceType::PrivateUse1, "tstor: not a PrivateUse1 device");
    tstor_dev(d.index()); // checks the index
    current_index = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { current_index = d.index(); }
  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    try {
      return static_cast<c10::DeviceIndex>(backend().count);
    } catch (...) {
      return 0;
    }
  }
  void synchronizeStream(const c10::Stream &s) const override {
    check(tstor_synchronize(nullptr, tstor_dev(s.device_index())), "synchronize");
  }
};

TstorGuard guard_impl;

// ---------------------------------------------------------------- tensors

tstor_dtype dtype_of(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Byte: return TSTOR_UINT8;
    case c10::ScalarType::Char: return TSTOR_INT8;
    case c10::ScalarType::Short: return TSTOR_INT16;
    case c10::ScalarType::Int: return TSTOR_INT32;
    case c10::ScalarType::Long: return TSTOR_INT64;
    case c10::ScalarType::Half: return TSTOR_FLOAT16;
    case c10::ScalarType::Float: return TSTOR_FLOAT32;
    case c10::ScalarType::Double: return TSTOR_FLOAT64;
    case c10::ScalarType::ComplexHalf: return TSTOR_COMPLEX32;
    case c10::ScalarType::ComplexFloat: return TSTOR_COMPLEX64;
    case c10::ScalarType::ComplexDouble: return TSTOR_COMPLEX128;
    case c10::ScalarType::Bool: return TSTOR_BOOL;
    case c10::ScalarType::BFloat16: return TSTOR_BFLOAT16;
    default: TORCH_CHECK(false, "tstor: no tstor dtype for ", t);
  }
}

// A tstor tensor over an at::Tensor's bytes: its own storage for a tensor of
// this device (the DataPtr's context), a borrowed wrap of the bytes for a cpu
// tensor. The result is a new reference.
struct Wrapped {
  tstor_tensor *t = nullptr;
  explicit Wrapped(const at::Tensor &x) {
    const c10::Storage &st = x.storage();
    tstor_storage *s = nullptr;
    bool borrowed = false;
    if (x.device().type() == c10::DeviceType::PrivateUse1) {
      s = static_cast<tstor_storage *>(st.data_ptr().get_context());
      TORCH_CHECK(s, "tstor: a PrivateUse1 tensor whose bytes are not a tstor storage");
    } else {
      TORCH_CHECK(x.device().is_cpu(), "tstor: copies to and from ", x.device(), " are not supported");
      check(tstor_storage_wrap(nullptr, cpu_dev(), st.data_ptr().get(), st.nbytes(), &s),
            "wrapping cpu memory");
      borrowed = true;
    }
    int rc = tstor_tensor_on_storage(s, dtype_of(x.scalar_type()), x.storage_offset(),
                                     static_cast<int>(x.dim()), x.sizes().data(),
                                     x.strides().data(), &t);
    if (borrowed) tstor_storage_release(s);
    check(rc, "viewing a tensor");
  }
  ~Wrapped() { tstor_tensor_release(t); }
  Wrapped(const Wrapped &) = delete;
  Wrapped &operator=(const Wrapped &) = delete;
};

c10::DispatchKeySet device_keys() { return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1); }

at::Tensor empty_memory_format(at::IntArrayRef size, c10::optional<at::ScalarType> dtype,
                               c10::optional<at::Layout>, c10::optional<at::Device> device,
                               c10::optional<bool>, c10::optional<at::MemoryFormat> memory_format) {
  c10::impl::VirtualGuardImpl guard_impl(c10::DeviceType::PrivateUse1);
  c10::OptionalDeviceGuard guard(device);
  return at::detail::empty_generic(size, &allocator, device_keys(),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         c10::optional<at::ScalarType> dtype, c10::optional<at::Layout>,
                         c10::optional<at::Device> device, c10::optional<bool>) {
  c10::OptionalDeviceGuard guard(device);
  return at::detail::empty_strided_generic(size, stride, &allocator, device_keys(),
                                           c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor &self, at::IntArrayRef size, at::IntArrayRef stride,
                      c10::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor &self, at::IntArrayRef size) { return at::native::view(self, size); }

at::Tensor reshape_alias(const at::Tensor &self, at::IntArrayRef size, at::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

// dst.copy_(self), self and dst on this device or the cpu: tstor's strided,
// converting, broadcasting copy (copy_ hands self over unexpanded), which
// stages through host memory where it must.
at::Tensor copy_from(const at::Tensor &self, const at::Tensor &dst, bool /*non_blocking*/) {
  if (dst.numel() == 0) return dst;
  Wrapped src(self), out(dst);
  check(tstor_tensor_copy_(out.t, src.t), "copy");
  return dst;
}

// A new storage of at least nbytes for self, its old bytes copied over.
void grow_storage(const at::Tensor &self, size_t nbytes) {
  c10::StorageImpl *st = self.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
  if (nbytes <= st->nbytes()) return;
  c10::impl::VirtualGuardImpl guard_impl(c10::DeviceType::PrivateUse1);
  c10::DeviceGuard guard(self.device());
  c10::DataPtr fresh = allocator.allocate(nbytes);
  auto *old = static_cast<tstor_storage *>(st->data_ptr().get_context());
  if (old && st->nbytes() > 0) {
    tstor_storage *head = nullptr;
    auto *grown = static_cast<tstor_storage *>(fresh.get_context());
    check(tstor_storage_view(grown, 0, st->nbytes(), &head), "resizing");
    int rc = tstor_storage_copy(head, old);
    tstor_storage_release(head);
    check(rc, "resizing");
  }
  st->set_data_ptr_noswap(std::move(fresh));
  st->set_nbytes(nbytes);
}

const at::Tensor &resize_storage(const at::Tensor &self, at::IntArrayRef size,
                          c10::optional<at::MemoryFormat> memory_format) {
  auto *impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (memory_format && *memory_format != at::MemoryFormat::Preserve)
    impl->empty_tensor_restride(*memory_format);
  size_t need = (self.storage_offset() + self.numel()) * self.element_size();
  if (self.numel() > 0) grow_storage(self, need);
  return self;
}

at::Tensor copy_from_and_resize(const at::Tensor &self, const at::Tensor &dst) {
  resize_storage(dst, self.sizes(), c10::nullopt);
  return copy_from(self, dst, false);
}

at::Tensor &fill_scalar(at::Tensor &self, const at::Scalar &value) {
  if (self.numel() == 0) return self;
  Wrapped t(self);
  if (value.isComplex()) {
    TORCH_CHECK(value.toComplexDouble().imag() == 0 || self.is_complex(),
                "tstor: fill_ of a complex value into a ", self.scalar_type(), " tensor");
    TORCH_CHECK(value.toComplexDouble().imag() == 0, "tstor: fill_ of complex values is not supported");
  }
  check(tstor_tensor_fill(t.t, value.toDouble()), "fill_");
  return self;
}

at::Tensor &zero(at::Tensor &self) { return fill_scalar(self, at::Scalar(0.0)); }

at::Scalar local_scalar_dense(const at::Tensor &self) {
  at::Tensor host = at::empty({}, self.options().device(at::kCPU));
  copy_from(self.reshape({}), host, false);
  return host.item();
}

at::Tensor &set_source_storage(at::Tensor &self, c10::Storage source, int64_t offset,
                               at::IntArrayRef size, at::IntArrayRef stride) {
  return at::native::set_storage_cpu_(self, source, offset, size, stride);
}

// torch.ops.tstor.*: what the device is, and what tstor holds on it.
std::string device_type() { return backend().name; }

int64_t memory_allocated(int64_t index) {
  tstor_stats st{};
  st.struct_size = sizeof st;
  check(tstor_device_stats(nullptr, tstor_dev(static_cast<c10::DeviceIndex>(index)), &st),
        "device statistics");
  return static_cast<int64_t>(st.allocated);
}

void cpu_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  at::native::cpu_fallback(op, stack);
}

// Registration, once per process. Everything is registered by hand rather
// than by the static TORCH_LIBRARY macros, so that a second copy of this
// library (loaded from another path) can find the first one's registrations
// and stand aside with a warning: the macros would register the tstor
// namespace twice, which aborts the process.
struct Registration {
  std::unique_ptr<torch::Library> defs, kernels, fallback;
  Registration() {
    if (c10::Dispatcher::singleton().findOp(c10::OperatorName("tstor::device_type", ""))) {
      TORCH_WARN("libtstor-torch is already loaded in this process: this second copy registers "
                 "nothing, and the first one serves privateuseone");
      return;
    }
    c10::SetAllocator(c10::DeviceType::PrivateUse1, &allocator);
    static c10::impl::DeviceGuardImplRegistrar guard_registrar(c10::DeviceType::PrivateUse1,
                                                               &guard_impl);
    defs = std::make_unique<torch::Library>(torch::Library::DEF, "tstor", c10::nullopt, __FILE__,
                                            __LINE__);
    defs->def("device_type() -> str", device_type);
    defs->def("memory_allocated(int device=0) -> int", memory_allocated);
    kernels = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                               c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    kernels->impl("empty.memory_format", empty_memory_format);
    kernels->impl("empty_strided", empty_strided);
    kernels->impl("as_strided", as_strided);
    kernels->impl("view", view);
    kernels->impl("_reshape_alias", reshape_alias);
    kernels->impl("resize_", resize_storage);
    kernels->impl("_copy_from", copy_from);
    kernels->impl("_copy_from_and_resize", copy_from_and_resize);
    kernels->impl("fill_.Scalar", fill_scalar);
    kernels->impl("zero_", zero);
    kernels->impl("_local_scalar_dense", local_scalar_dense);
    kernels->impl("set_.source_Storage_storage_offset", set_source_storage);
    fallback = std::make_unique<torch::Library>(torch::Library::IMPL, "_",
                                                c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    fallback->fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
  }
};

Registration registration;

} // namespace
