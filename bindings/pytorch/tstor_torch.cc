// libtstor-torch: any tstor device type as PyTorch's PrivateUse1 device, on
// PyTorch 1.13 and 2.x alike (tstor_torch.h says what differs; torch2.cc has
// what 2.x adds).
//
// torch.ops.load_library("libtstor-torch.so") registers, for the device type
// TSTOR_TORCH_DEVICE names (default: hpu when loaded, else the first type that
// is neither host memory nor metadata only):
//   - the allocator: a DataPtr whose context is a tstor storage on the device
//     and whose deleter releases it, so every byte PyTorch holds is tstor's;
//   - the device guard: device count, current device, and streams and events
//     that are tstor's;
//   - the kernels PyTorch needs to hold tensors there (empty, empty_strided,
//     as_strided, view, _reshape_alias, resize_, _copy_from,
//     _copy_from_and_resize, fill_, zero_, _local_scalar_dense, the set_
//     family), and PyTorch's device-generic views and is_set_to, which the
//     fallback would run on copies; every other operator runs through
//     PyTorch's cpu fallback, which copies the operands to the cpu and back
//     with _copy_from;
//   - torch.ops.tstor.*: what the device is and what tstor holds on it, for
//     the device module tstor_torch.py makes of them (device_type,
//     device_count, current_device, set_device, synchronize, memory_stats,
//     streams, ...).
// Copies and fills are tstor's (tstor_tensor_copy_, tstor_storage_fill_pattern):
// strided, converting, between any two devices, never touching device bytes
// from the host. Errors surface as Python RuntimeErrors carrying tstor's
// message.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/is_set_to_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <tstor/tensor.h>
#include <tstor/tstor.h>

#include "tstor_torch.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tstor_torch {

// ------------------------------------------------------------------ state

// The tstor device type behind PrivateUse1, found once, as the library loads:
// the default context opens as everywhere (TSTOR_CONFIG, the installed config, the
// embedded default). A failure is kept and raised on every use.
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

c10::DeviceIndex current_device() { return current_index; }

void set_current_device(c10::DeviceIndex index) {
  tstor_dev(index); // checks the index
  current_index = index;
}

tstor_device tstor_dev(c10::DeviceIndex index) {
  const Backend &b = backend();
  TORCH_CHECK(index >= 0 && index < b.count, "tstor: ", b.name, ":", int(index),
              " does not exist (", b.count, " device", b.count == 1 ? "" : "s", ")");
  return tstor_device{b.type, index};
}

tstor_device_properties properties_of(c10::DeviceIndex index) {
  tstor_device_properties p = TSTOR_DEVICE_PROPERTIES_INIT;
  check(tstor_device_get_properties(nullptr, tstor_dev(index), &p), "device properties");
  return p;
}

std::pair<size_t, size_t> memory_info(c10::DeviceIndex index) {
  tstor_device_properties p = properties_of(index);
  const uint32_t both = TSTOR_PROP_FREE | TSTOR_PROP_TOTAL;
  TORCH_CHECK_NOT_IMPLEMENTED((p.reported & both) == both, "tstor: ", backend().name, ":",
                              int(index), " does not report its ",
                              p.reported & TSTOR_PROP_TOTAL ? "free" : "free and total",
                              " memory (its backend's properties op)");
  return {static_cast<size_t>(p.free_bytes), static_cast<size_t>(p.total_bytes)};
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

// Every DataPtr the allocator hands out has release_storage as its deleter
// and its tstor storage as its context. PyTorch makes DataPtrs of its own
// into those bytes too (a slice of an untyped storage has the base's
// StorageImpl as its context), so the live allocations are also kept by
// address, and bytes PyTorch names are found in the storage that holds them.
void AddressTable::add(tstor_storage *s) {
  if (tstor_storage_nbytes(s) == 0) return;
  std::lock_guard<std::mutex> hold(lock_);
  by_address_[key(s)] = s;
}

void AddressTable::remove(tstor_storage *s) {
  if (tstor_storage_nbytes(s) == 0) return;
  std::lock_guard<std::mutex> hold(lock_);
  by_address_.erase(key(s));
}

tstor_storage *AddressTable::find(int index, const void *p, size_t *offset) {
  auto at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> hold(lock_);
  auto it = by_address_.upper_bound({index, at});
  if (!p || it == by_address_.begin()) return nullptr;
  --it;
  tstor_storage *owner = it->second;
  if (it->first.first != index || at - it->first.second >= tstor_storage_nbytes(owner))
    return nullptr;
  *offset = at - it->first.second;
  return tstor_storage_retain(owner);
}

std::pair<int, uintptr_t> AddressTable::key(const tstor_storage *s) {
  return {tstor_storage_device(s).index, reinterpret_cast<uintptr_t>(tstor_storage_data(s))};
}

AddressTable &live() {
  static AddressTable *table = new AddressTable; // never destroyed: deleters may run at exit
  return *table;
}

void release_storage(void *ctx) {
  auto *s = static_cast<tstor_storage *>(ctx);
  live().remove(s);
  tstor_storage_release(s);
}

struct TstorAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) TSTOR_ALLOCATE_CONST override {
    c10::DeviceIndex index = current_index;
    tstor_storage *s = nullptr;
    check(tstor_storage_new(nullptr, tstor_dev(index), nbytes, &s), "allocating device memory");
    live().add(s);
    return {tstor_storage_data(s), s, &release_storage,
            c10::Device(c10::DeviceType::PrivateUse1, index)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
#if TSTOR_TORCH_2
  void copy_data(void *dest, const void *src, size_t count) const override;
#endif
};

TstorAllocator allocator;

c10::Allocator *device_allocator() { return &allocator; }

// The allocation of this library's that holds the PrivateUse1 bytes at p,
// as a new reference, and their offset in it; nullptr for bytes it did not
// allocate.
tstor_storage *allocation_of(const c10::DataPtr &p, size_t *offset) {
  *offset = 0;
  if (p.get_deleter() == &release_storage)
    return tstor_storage_retain(static_cast<tstor_storage *>(p.get_context()));
  return live().find(p.device().index(), p.get(), offset);
}

c10::DeviceIndex device_of_address(const void *p) {
  for (int index = 0; index < backend().count; index++) {
    size_t offset;
    tstor_storage *s = live().find(index, p, &offset);
    tstor_storage_release(s);
    if (s) return static_cast<c10::DeviceIndex>(index);
  }
  return -1;
}

tstor_storage *storage_of(const c10::DataPtr &p, size_t nbytes) {
  tstor_storage *s = nullptr;
  if (nbytes == 0) {
    check(tstor_storage_wrap(nullptr, tstor_dev(p.device().index()), nullptr, 0, &s),
          "an empty storage");
    return s;
  }
  size_t offset;
  tstor_storage *owner = allocation_of(p, &offset);
  if (!owner) {
    // Device bytes PyTorch got elsewhere (a DLPack capsule of tstor's, a
    // from_blob): borrowed for as long as the caller's DataPtr holds them.
    check(tstor_storage_wrap(nullptr, tstor_dev(p.device().index()), p.get(), nbytes, &s),
          "wrapping device memory");
    return s;
  }
  if (offset == 0 && nbytes == tstor_storage_nbytes(owner)) return owner;
  int rc = tstor_storage_view(owner, offset, nbytes, &s);
  tstor_storage_release(owner);
  check(rc, "viewing a storage");
  return s;
}

#if TSTOR_TORCH_2
// Allocator::clone's copy, between two of this allocator's allocations named
// by address alone: each is looked for on every device of the type.
void TstorAllocator::copy_data(void *dest, const void *src, size_t count) const {
  if (count == 0) return;
  auto find = [count](const void *p) {
    for (int index = 0; index < backend().count; index++) {
      size_t offset;
      tstor_storage *s = live().find(index, p, &offset);
      if (!s) continue;
      tstor_storage *view = nullptr;
      int rc = tstor_storage_view(s, offset, count, &view);
      tstor_storage_release(s);
      check(rc, "Allocator::clone");
      return view;
    }
    TORCH_CHECK(false, "tstor: Allocator::clone: ", p, " is not in this allocator's storages");
  };
  tstor_storage *d = find(dest), *s = nullptr;
  try {
    s = find(src);
  } catch (...) {
    tstor_storage_release(d);
    throw;
  }
  int rc = tstor_storage_copy(d, s);
  tstor_storage_release(d);
  tstor_storage_release(s);
  check(rc, "Allocator::clone");
}
#endif

// ---------------------------------------------------------------- streams

// PyTorch's streams on a device, as CUDA numbers them: id 0 is the default
// stream, ids 1..kPoolStreams a pool handed out round robin
// (getStreamFromGlobalPool). Each is a tstor stream, made on first use and kept
// until the process exits, as PyTorch keeps its pools. Copies and fills are
// synchronous tstor calls; they first wait for the work queued on the current
// stream (events it was told to wait for), so they run in that stream's order.
constexpr int kPoolStreams = 8;
constexpr int kMaxDevices = 128; // c10::DeviceIndex is 8 bits

struct StreamTable {
  std::mutex lock;
  std::atomic<tstor_stream *> streams[kMaxDevices][kPoolStreams + 1] = {};
  std::atomic<unsigned> next[kMaxDevices] = {};
  ~StreamTable() {
    for (auto &device : streams)
      for (auto &s : device) tstor_stream_free(s.exchange(nullptr));
  }
};

StreamTable &stream_table() {
  static StreamTable table;
  return table;
}

thread_local c10::StreamId current_stream_id[kMaxDevices] = {};

tstor_stream *tstor_stream_of(const c10::Stream &stream) {
  tstor_device dev = tstor_dev(stream.device_index());
  c10::StreamId id = stream.id();
  TORCH_CHECK(id >= 0 && id <= kPoolStreams, "tstor: ", stream, " is not a stream of this device");
  std::atomic<tstor_stream *> &slot = stream_table().streams[dev.index][id];
  tstor_stream *s = slot.load(std::memory_order_acquire);
  if (s) return s;
  std::lock_guard<std::mutex> hold(stream_table().lock);
  s = slot.load(std::memory_order_relaxed);
  if (!s) {
    check(tstor_stream_new(nullptr, dev, &s), "creating a stream");
    slot.store(s, std::memory_order_release);
  }
  return s;
}

c10::Stream current_stream(c10::DeviceIndex index) {
  if (index < 0) index = current_index; // a device without an index is the current one
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, index),
                     current_stream_id[index]);
}

// Before synchronous work on a device tensor: the current stream's queued
// work (waits on events) comes first. Nothing to do on the default stream,
// whose work is all synchronous.
void join_current_stream(const at::Tensor &t) {
  if (t.device().type() != c10::DeviceType::PrivateUse1) return;
  c10::DeviceIndex index = t.device().index();
  if (index < 0 || current_stream_id[index] == 0) return;
  check(tstor_stream_synchronize(tstor_stream_of(current_stream(index))), "waiting for the stream");
}

// ------------------------------------------------------------ device guard

bool tstor_dtype_of(c10::ScalarType t, tstor_dtype *out); // below, with the tensors

// A device without an index ("tstor") is the current one.
c10::Device with_index(c10::Device d) {
  return d.has_index() ? d : c10::Device(d.type(), current_index);
}

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
    set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { current_index = d.index(); }
  c10::Stream getStream(c10::Device d) const noexcept override { return current_stream(d.index()); }
  c10::Stream getDefaultStream(c10::Device d) const override {
    d = with_index(d);
    tstor_dev(d.index());
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*isHighPriority*/) const override {
    d = with_index(d);
    tstor_dev(d.index());
    unsigned n = stream_table().next[d.index()].fetch_add(1, std::memory_order_relaxed);
    return c10::Stream(c10::Stream::UNSAFE, d, 1 + n % kPoolStreams);
  }
#if TSTOR_TORCH_2
  // torch.Stream(device=...): a stream of the pool, as CUDA hands out its
  // pool's streams.
  c10::Stream getNewStream(c10::Device d, int /*priority*/) const override {
    return getStreamFromGlobalPool(d, false);
  }
#endif
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    c10::Stream old = current_stream(s.device_index());
    current_stream_id[old.device_index()] = s.id();
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    try {
      return static_cast<c10::DeviceIndex>(backend().count);
    } catch (...) {
      return 0;
    }
  }
  void record(void **event, const c10::Stream &stream, const c10::DeviceIndex index,
              const c10::EventFlag) const override {
    TORCH_CHECK(index == -1 || index == stream.device_index(), "tstor: an event of device ",
                int(index), " recorded on ", stream);
    tstor_stream *s = tstor_stream_of(stream);
    if (!*event) {
      tstor_event *e = nullptr;
      check(tstor_event_new(nullptr, tstor_dev(stream.device_index()), &e), "creating an event");
      *event = e;
    }
    check(tstor_event_record(static_cast<tstor_event *>(*event), s), "recording an event");
  }
  void block(void *event, const c10::Stream &stream) const override {
    if (!event) return; // never recorded: nothing to wait for
    check(tstor_stream_wait_event(tstor_stream_of(stream), static_cast<tstor_event *>(event)),
          "waiting for an event");
  }
  bool queryEvent(void *event) const override {
    if (!event) return true;
    int rc = tstor_event_query(static_cast<tstor_event *>(event));
    if (rc == TSTOR_EAGAIN) return false;
    check(rc, "querying an event");
    return true;
  }
  void destroyEvent(void *event, const c10::DeviceIndex) const noexcept override {
    tstor_event_free(static_cast<tstor_event *>(event));
  }
  bool queryStream(const c10::Stream &stream) const override {
    void *event = nullptr;
    record(&event, stream, stream.device_index(), c10::EventFlag::PYTORCH_DEFAULT);
    bool done;
    try {
      done = queryEvent(event);
    } catch (...) {
      destroyEvent(event, stream.device_index());
      throw;
    }
    destroyEvent(event, stream.device_index());
    return done;
  }
  void synchronizeStream(const c10::Stream &s) const override {
    check(tstor_stream_synchronize(tstor_stream_of(s)), "synchronizing a stream");
    if (s.id() == 0) check(tstor_synchronize(nullptr, tstor_dev(s.device_index())), "synchronize");
  }
#if TSTOR_TORCH_2
  void synchronizeEvent(void *event) const override {
    if (!event) return; // never recorded: nothing to wait for
    check(tstor_event_synchronize(static_cast<tstor_event *>(event)), "synchronizing an event");
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    check(tstor_synchronize(nullptr, tstor_dev(index)), "synchronize");
  }
  double elapsedTime(void *, void *, const c10::DeviceIndex) const override {
    TORCH_CHECK(false, "tstor: events keep no time (tstor_event has no clock)");
  }
  // torch.accelerator.get_device_capability: the dtypes the device's copies
  // take.
  c10::DeviceCapability getDeviceCapability(c10::Device) const override {
    c10::DeviceCapability cap;
    tstor_dtype unused;
#define TSTOR_TORCH_HAS(_, name)                          \
  cap.capability_data.supported_scalar_types.has_##name = \
      tstor_dtype_of(c10::ScalarType::name, &unused) ? 1 : 0;
    AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(TSTOR_TORCH_HAS)
#undef TSTOR_TORCH_HAS
    return cap;
  }
#endif
  void recordDataPtrOnStream(const c10::DataPtr &data, const c10::Stream &stream) const override {
    if (!data.get() || stream.id() == 0) return; // the default stream's work is already done
    size_t offset;
    tstor_storage *s = allocation_of(data, &offset);
    if (!s) return; // bytes another owner frees: theirs to keep while the stream uses them
    int rc = tstor_storage_record_stream(s, tstor_stream_of(stream));
    tstor_storage_release(s);
    check(rc, "record_stream");
  }
};

TstorGuard guard_impl;

// ---------------------------------------------------------------- tensors

bool tstor_dtype_of(c10::ScalarType t, tstor_dtype *out) {
  switch (t) {
    case c10::ScalarType::Byte: *out = TSTOR_UINT8; return true;
    case c10::ScalarType::Char: *out = TSTOR_INT8; return true;
    case c10::ScalarType::Short: *out = TSTOR_INT16; return true;
    case c10::ScalarType::Int: *out = TSTOR_INT32; return true;
    case c10::ScalarType::Long: *out = TSTOR_INT64; return true;
    case c10::ScalarType::Half: *out = TSTOR_FLOAT16; return true;
    case c10::ScalarType::Float: *out = TSTOR_FLOAT32; return true;
    case c10::ScalarType::Double: *out = TSTOR_FLOAT64; return true;
    case c10::ScalarType::ComplexHalf: *out = TSTOR_COMPLEX32; return true;
    case c10::ScalarType::ComplexFloat: *out = TSTOR_COMPLEX64; return true;
    case c10::ScalarType::ComplexDouble: *out = TSTOR_COMPLEX128; return true;
    case c10::ScalarType::Bool: *out = TSTOR_BOOL; return true;
    case c10::ScalarType::BFloat16: *out = TSTOR_BFLOAT16; return true;
    default: return false;
  }
}

tstor_dtype dtype_of(c10::ScalarType t) {
  tstor_dtype d;
  TORCH_CHECK(tstor_dtype_of(t, &d), "tstor: no tstor dtype for ", t);
  return d;
}

// A tstor tensor over an at::Tensor's bytes: its own storage for a tensor of
// this device (the DataPtr's context), a borrowed wrap of the bytes for a cpu
// tensor. The result is a new reference.
struct Wrapped {
  tstor_tensor *t = nullptr;
  explicit Wrapped(const at::Tensor &x) {
    const c10::Storage &st = x.storage();
    tstor_storage *s = nullptr;
    if (x.device().type() == c10::DeviceType::PrivateUse1) {
      s = storage_of(st.data_ptr(), st.nbytes());
    } else {
      TORCH_CHECK(x.device().is_cpu(), "tstor: copies to and from ", x.device(), " are not supported");
      check(tstor_storage_wrap(nullptr, cpu_dev(), st.data_ptr().get(), st.nbytes(), &s),
            "wrapping cpu memory");
    }
    int rc = tstor_tensor_on_storage(s, dtype_of(x.scalar_type()), x.storage_offset(),
                                     static_cast<int>(x.dim()), x.sizes().data(),
                                     x.strides().data(), &t);
    tstor_storage_release(s);
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

void copy_bytes(const at::Tensor &dst, const at::Tensor &self) {
  Wrapped src(self), out(dst);
  check(tstor_tensor_copy_(out.t, src.t), "copy");
}

// dst.copy_(self), self and dst on this device or the cpu: tstor's strided,
// converting, broadcasting copy (copy_ hands self over unexpanded), which
// stages through host memory where it must. A tensor's conjugate and
// negative bits (.conj(), _neg_view()) stand for an operation its bytes have
// not had; PyTorch leaves them to the copy kernels (the math-bit fallbacks
// would clone, and a clone copies: see math_bit_passes). Where self's and
// dst's bits differ, the bytes go through a cpu tensor that takes the
// operations.
at::Tensor copy_from(const at::Tensor &self, const at::Tensor &dst, bool /*non_blocking*/) {
  if (dst.numel() == 0) return dst;
  join_current_stream(self);
  join_current_stream(dst);
  bool conj = self.is_conj() != dst.is_conj(), neg = self.is_neg() != dst.is_neg();
  if (!conj && !neg) {
    copy_bytes(dst, self);
    return dst;
  }
  at::Tensor host = at::empty(self.sizes(), self.options().device(at::kCPU));
  copy_bytes(host, self);
  if (conj) host.conj_physical_();
  if (neg) host.neg_();
  copy_bytes(dst, host);
  return dst;
}

// A new storage of at least nbytes for self, its old bytes copied over by
// tstor (PyTorch's resize_bytes_cpu would memcpy device bytes).
void grow_storage(const at::Tensor &self, size_t nbytes) {
  c10::StorageImpl *st = self.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
  if (nbytes <= st->nbytes()) return;
  TORCH_CHECK(st->resizable(), "Trying to resize storage that is not resizable");
  c10::impl::VirtualGuardImpl guard_impl(c10::DeviceType::PrivateUse1);
  c10::DeviceGuard guard(self.device());
  c10::DataPtr fresh = allocator.allocate(nbytes);
  if (st->nbytes() > 0) {
    tstor_storage *old = storage_of(st->data_ptr(), st->nbytes());
    tstor_storage *head = nullptr;
    auto *grown = static_cast<tstor_storage *>(fresh.get_context());
    int rc = tstor_storage_view(grown, 0, st->nbytes(), &head);
    if (rc == 0) rc = tstor_storage_copy(head, old);
    tstor_storage_release(head);
    tstor_storage_release(old);
    check(rc, "resizing");
  }
  st->set_data_ptr_noswap(std::move(fresh));
  st->set_nbytes(nbytes);
}

// PyTorch's resize_impl_cpu_ with the storage grown by tstor: nothing changes
// when the sizes (and strides, if given) are already those, so an out= or
// in-place operand that is a strided view keeps its layout.
void resize_impl(const at::Tensor &self, at::IntArrayRef size, at::OptionalIntArrayRef stride) {
  c10::TensorImpl *impl = self.unsafeGetTensorImpl();
  if (impl->sizes() == size && (!stride || impl->strides() == *stride)) return;
  size_t itemsize = impl->dtype().itemsize(), nbytes;
  if (stride) {
    impl->set_sizes_and_strides(size, *stride);
    nbytes = at::detail::computeStorageNbytes(size, *stride, itemsize, impl->storage_offset());
  } else {
    impl->set_sizes_contiguous(size);
    nbytes = at::detail::computeStorageNbytesContiguous(size, itemsize, impl->storage_offset());
  }
  if (impl->numel() > 0) grow_storage(self, nbytes);
}

const at::Tensor &resize_(const at::Tensor &self, at::IntArrayRef size,
                          c10::optional<at::MemoryFormat> memory_format) {
  resize_impl(self, size, c10::nullopt);
  if (memory_format) {
    TORCH_CHECK(*memory_format != at::MemoryFormat::Preserve, "Unsupported memory format",
                *memory_format);
    self.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor copy_from_and_resize(const at::Tensor &self, const at::Tensor &dst) {
  resize_(dst, self.sizes(), c10::nullopt);
  return copy_from(self, dst, false);
}

// fill_ as PyTorch fills: the value converted by the cpu's fill_ (its
// overflow and complex-to-real errors included) into an element, whose
// bytes tstor then repeats over the device tensor (the cpu fills two: a
// tensor of one element takes a path, scalar_fill, that skips 2.x's checks).
// Dimensions of stride 0 hold one element each, so they are filled once;
// what is left is filled by pattern when it is dense, else by a broadcast
// copy.
at::Tensor &fill_scalar(at::Tensor &self, const at::Scalar &value) {
  at::Tensor element =
      at::empty({2}, at::TensorOptions().dtype(self.scalar_type())).fill_(value)[0];
  if (self.numel() == 0) return self;
  join_current_stream(self);
  at::Tensor target = self;
  for (int64_t d = 0; d < target.dim(); d++)
    if (target.stride(d) == 0) target = target.narrow(d, 0, 1);
  if (target.is_non_overlapping_and_dense()) {
    const c10::Storage &st = target.storage();
    tstor_storage *s = storage_of(st.data_ptr(), st.nbytes());
    size_t esize = target.element_size();
    tstor_storage *span = nullptr;
    int rc = tstor_storage_view(s, target.storage_offset() * esize, target.numel() * esize, &span);
    tstor_storage_release(s);
    check(rc, "fill_");
    rc = tstor_storage_fill_pattern(span, element.data_ptr(), esize);
    tstor_storage_release(span);
    check(rc, "fill_");
    return self;
  }
  Wrapped src(element), out(target);
  check(tstor_tensor_copy_(out.t, src.t), "fill_");
  return self;
}

at::Tensor &zero(at::Tensor &self) { return fill_scalar(self, at::Scalar(0)); }

at::Scalar local_scalar_dense(const at::Tensor &self) {
  at::Tensor host = at::empty({}, self.options().device(at::kCPU));
  copy_from(self.reshape({}), host, false);
  return host.item();
}

// The set_ family: PyTorch's device-generic forms where it has them; the cpu
// forms allocate with the cpu allocator or memcpy a storage they grow.
at::Tensor &set_storage(at::Tensor &self, c10::Storage source, int64_t offset,
                        at::IntArrayRef size, at::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(offset);
  resize_impl(self, size,
              stride.data() ? at::OptionalIntArrayRef(stride) : at::OptionalIntArrayRef());
  return self;
}

at::Tensor &set_empty(at::Tensor &self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, &allocator, /*resizable=*/true);
  return set_storage(self, empty, 0, {0}, {});
}

at::Tensor &set_whole_storage(at::Tensor &self, c10::Storage source) {
  return at::native::set_(self, source);
}

at::Tensor &set_tensor(at::Tensor &self, const at::Tensor &source) {
  return at::native::set_tensor_(self, source);
}

bool is_set_to(const at::Tensor &self, const at::Tensor &tensor) {
  return at::native::is_set_to(self, tensor);
}

// Views whose PyTorch kernels are device-generic but registered for the cpu
// only: through the fallback they would be copies, not views.
at::Tensor unfold(const at::Tensor &self, int64_t dimension, int64_t size, int64_t step) {
  return at::native::unfold(self, dimension, size, step);
}

at::Tensor view_as_real(const at::Tensor &self) { return at::native::view_as_real(self); }

at::Tensor view_as_complex(const at::Tensor &self) { return at::native::view_as_complex(self); }

// ------------------------------------------------------ torch.ops.tstor

// What the device is and what tstor holds on it: the device module that
// tstor_torch.py registers is made of these. A device argument of -1 is the
// current device.
c10::DeviceIndex device_arg(int64_t index) {
  return index < 0 ? current_index : static_cast<c10::DeviceIndex>(index);
}

std::string device_type() { return backend().name; }

int64_t device_count() { return backend().count; }

std::string describe(int64_t index) {
  char text[256];
  check(tstor_device_describe(nullptr, tstor_dev(device_arg(index)), text, sizeof text),
        "describing a device");
  return text;
}

int64_t op_current_device() { return current_index; }

// The device's properties, for the device module's get_device_properties:
// [reported, capabilities, free, total, alignment, largest allocation] (the
// TSTOR_PROP_* and TSTOR_DEVICE_CAP_* bits, then the fields, 0 where not
// reported), its id, and the capability bits' names in bit order.
std::vector<int64_t> properties(int64_t index) {
  tstor_device_properties p = properties_of(device_arg(index));
  return {p.reported,
          p.capabilities,
          static_cast<int64_t>(p.free_bytes),
          static_cast<int64_t>(p.total_bytes),
          static_cast<int64_t>(p.alignment),
          static_cast<int64_t>(p.max_allocation)};
}

std::string device_id(int64_t index) { return properties_of(device_arg(index)).id; }

std::vector<std::string> capability_names() {
  std::vector<std::string> names;
#define TSTOR_TORCH_CAP_NAME(name, bit, text) \
  names.resize(std::max<size_t>(names.size(), bit + 1)), names[bit] = text;
  TSTOR_DEVICE_CAP_MAP(TSTOR_TORCH_CAP_NAME)
#undef TSTOR_TORCH_CAP_NAME
  return names;
}

std::vector<int64_t> mem_get_info(int64_t index) {
  std::pair<size_t, size_t> info = memory_info(device_arg(index));
  return {static_cast<int64_t>(info.first), static_cast<int64_t>(info.second)};
}

void op_set_device(int64_t index) { set_current_device(device_arg(index)); }

void synchronize(int64_t index) {
  check(tstor_synchronize(nullptr, tstor_dev(device_arg(index))), "synchronize");
}

tstor_stats stats_of(int64_t index) {
  tstor_stats st = TSTOR_STATS_INIT;
  check(tstor_device_stats(nullptr, tstor_dev(device_arg(index)), &st), "device statistics");
  return st;
}

int64_t memory_allocated(int64_t index) { return static_cast<int64_t>(stats_of(index).allocated); }

// tstor_stats' counters by name, in TSTOR_STATS_FIELDS' order.
std::vector<std::string> memory_stats_fields() {
  return {
#define TSTOR_TORCH_FIELD_NAME(name, comment) #name,
      TSTOR_STATS_FIELDS(TSTOR_TORCH_FIELD_NAME)
#undef TSTOR_TORCH_FIELD_NAME
  };
}

std::vector<int64_t> memory_stats(int64_t index) {
  tstor_stats st = stats_of(index);
  return {
#define TSTOR_TORCH_FIELD_VALUE(name, comment) static_cast<int64_t>(st.name),
      TSTOR_STATS_FIELDS(TSTOR_TORCH_FIELD_VALUE)
#undef TSTOR_TORCH_FIELD_VALUE
  };
}

void reset_peak_memory_stats(int64_t index) {
  check(tstor_device_reset_peak(nullptr, tstor_dev(device_arg(index))), "resetting the peaks");
}

void empty_cache(int64_t index) {
  check(tstor_device_empty_cache(nullptr, tstor_dev(device_arg(index))), "emptying the cache");
}

// The current stream of a device (its id, as torch.Stream(stream_id=...)
// takes it), and setting it, for the device module's current_stream and
// set_stream.
int64_t op_current_stream(int64_t index) {
  c10::DeviceIndex d = device_arg(index);
  tstor_dev(d);
  return current_stream(d).id();
}

void set_stream(int64_t index, int64_t stream_id) {
  c10::DeviceIndex d = device_arg(index);
  tstor_dev(d);
  TORCH_CHECK(stream_id >= 0 && stream_id <= kPoolStreams, "tstor: stream ", stream_id,
              " is not a stream of this device");
  current_stream_id[d] = stream_id;
}

// The PyTorch this library was built against ("2.15.0"): torch_tstor.py
// refuses to load it into another.
std::string torch_version() { return TORCH_VERSION; }

// PyTorch's cpu fallback, after moving the device tensors of optional tensor
// lists (the indices of index and index_put_) to the cpu: 1.13's fallback
// moves tensors and tensor lists only, and the cpu kernel then refuses
// indices on another device. Those lists are only ever read.
void cpu_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  size_t nargs = op.schema().arguments().size();
  for (size_t i = stack->size() - nargs; i < stack->size(); i++) {
    c10::IValue &arg = (*stack)[i];
    if (!arg.isOptionalTensorList()) continue;
    c10::List<c10::optional<at::Tensor>> list = arg.toOptionalTensorList();
    bool moved = false;
    for (size_t k = 0; k < list.size(); k++) {
      c10::optional<at::Tensor> t = list.get(k);
      if (t && t->defined() && t->device().type() == c10::DeviceType::PrivateUse1) {
        list.set(k, t->cpu());
        moved = true;
      }
    }
    if (moved) arg = c10::IValue(list);
  }
#if TSTOR_TORCH_2
  generators_to_cpu(op, stack);
#endif
  at::native::cpu_fallback(op, stack);
}

// Registration, once per process. Everything is registered by hand rather
// than by the static TORCH_LIBRARY macros, so that a second copy of this
// library (loaded from another path) can find the first one's registrations
// and stand aside with a warning: the macros would register the tstor
// namespace twice, which aborts the process.
struct Registration {
  std::unique_ptr<torch::Library> defs, kernels, conjugate, negative, fallback;

  // The conjugate and negative bits' fallbacks resolve a bit by cloning, and
  // a clone copies with copy_, which reaches _copy_from with the bit still
  // set: the fallback again, until the stack overflows. PyTorch's copy
  // kernels take the bits themselves (MathBitsFallback.h), and so does
  // copy_from: _copy_from passes through these keys untouched. Only devices
  // PyTorch's copy_ does not handle itself reach _copy_from.
  static void math_bit_passes(std::unique_ptr<torch::Library> &lib, c10::DispatchKey key) {
    lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
    lib->impl("_copy_from", torch::CppFunction::makeFallthrough());
    lib->impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
  }

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
    defs->def("device_count() -> int", device_count);
    defs->def("describe(int device=-1) -> str", describe);
    defs->def("current_device() -> int", op_current_device);
    defs->def("properties(int device=-1) -> int[]", properties);
    defs->def("device_id(int device=-1) -> str", device_id);
    defs->def("capability_names() -> str[]", capability_names);
    defs->def("mem_get_info(int device=-1) -> int[]", mem_get_info);
    defs->def("set_device(int device) -> ()", op_set_device);
    defs->def("synchronize(int device=-1) -> ()", synchronize);
    defs->def("memory_allocated(int device=0) -> int", memory_allocated);
    defs->def("memory_stats_fields() -> str[]", memory_stats_fields);
    defs->def("memory_stats(int device=-1) -> int[]", memory_stats);
    defs->def("reset_peak_memory_stats(int device=-1) -> ()", reset_peak_memory_stats);
    defs->def("empty_cache(int device=-1) -> ()", empty_cache);
    defs->def("current_stream(int device=-1) -> int", op_current_stream);
    defs->def("set_stream(int device, int stream_id) -> ()", set_stream);
    defs->def("torch_version() -> str", torch_version);
#if TSTOR_TORCH_2
    register_torch2(*defs);
#endif
    kernels = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                               c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    kernels->impl("empty.memory_format", empty_memory_format);
    kernels->impl("empty_strided", empty_strided);
    kernels->impl("as_strided", as_strided);
    kernels->impl("view", view);
    kernels->impl("_reshape_alias", reshape_alias);
    kernels->impl("resize_", resize_);
    kernels->impl("_copy_from", copy_from);
    kernels->impl("_copy_from_and_resize", copy_from_and_resize);
    kernels->impl("fill_.Scalar", fill_scalar);
    kernels->impl("zero_", zero);
    kernels->impl("_local_scalar_dense", local_scalar_dense);
    kernels->impl("set_.source_Storage_storage_offset", set_storage);
    kernels->impl("set_.source_Storage", set_whole_storage);
    kernels->impl("set_.source_Tensor", set_tensor);
    kernels->impl("set_", set_empty);
    kernels->impl("is_set_to", is_set_to);
    kernels->impl("unfold", unfold);
    kernels->impl("view_as_real", view_as_real);
    kernels->impl("view_as_complex", view_as_complex);
    math_bit_passes(conjugate, c10::DispatchKey::Conjugate);
    math_bit_passes(negative, c10::DispatchKey::Negative);
    fallback = std::make_unique<torch::Library>(torch::Library::IMPL, "_",
                                                c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    fallback->fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
    // The context opens now, as the library loads, so a bad config or a
    // missing device type is reported at once. An initialiser cannot raise
    // into Python: the message is a warning here, and every use of the device
    // raises it as a RuntimeError.
    try {
      backend();
    } catch (const c10::Error &e) {
      TORCH_WARN("libtstor-torch: privateuseone cannot be used: ", e.what_without_backtrace());
    }
  }
};

Registration registration;

} // namespace tstor_torch
