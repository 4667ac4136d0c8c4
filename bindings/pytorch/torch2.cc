// What PyTorch 2.x asks of a PrivateUse1 device beyond what 1.13 did
// (libtstor-torch2.so only; tstor_torch.cc has the rest):
//   - the PrivateUse1 hooks (at::PrivateUse1HooksInterface): whether the
//     device is there, its current device, the device of an address, its
//     generators, and storage resizing;
//   - the generators: each device has a default generator, and
//     torch.Generator(device=...) makes more. The operators that draw random
//     numbers run through the cpu fallback, so a device generator is a cpu
//     generator of its own (mt19937, seeded as the cpu's is) that the cpu
//     kernels draw from: a seed gives the device the sequence it gives the
//     cpu, from a state apart from the cpu's;
//   - pinned host memory: PyTorch's pinned-memory allocator for the device
//     hands out tstor's (tstor_storage_new_pinned: cuda's, hpu-stub's, or
//     whichever backend offers it), so pin_memory() and is_pinned() work;
//   - a DeviceAllocator over the device's allocator, which is what
//     torch.accelerator's memory calls ask for: tstor's statistics as
//     PyTorch's DeviceStats, and free and total memory from the device's
//     properties;
//   - autocast: torch.autocast(device_type=<the device>) casts as it casts
//     on cuda, by PyTorch's own lists of which operators run in lower
//     precision, which in float32 and which in the widest input type
//     (ATen/autocast_mode.h); every other operator runs as it is given;
//   - torch.ops.tstor's random-number operators, for the device module's
//     manual_seed, seed, initial_seed, get_rng_state and set_rng_state.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "tstor_torch.h"

#include <mutex>

namespace tstor_torch {
namespace {

constexpr int kMaxDevices = 128; // c10::DeviceIndex is 8 bits

// ------------------------------------------------------------- generators

// A generator of a device: the cpu generator `cpu` does the drawing, under
// its own mutex (the one cpu kernels lock); this one's mutex is the one
// PyTorch's Python calls lock around seeding and state.
struct TstorGenerator final : c10::GeneratorImpl {
  at::Generator cpu;

  explicit TstorGenerator(c10::DeviceIndex index, at::Generator twin)
      : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        cpu(std::move(twin)) {}
  explicit TstorGenerator(c10::DeviceIndex index)
      : TstorGenerator(index, at::make_generator<at::CPUGeneratorImpl>(c10::default_rng_seed_val)) {
  }

  void set_current_seed(uint64_t seed) override {
    std::lock_guard<std::mutex> hold(cpu.mutex());
    cpu.set_current_seed(seed);
  }
  void set_offset(uint64_t) override {
    TORCH_CHECK(false,
                "tstor: a device generator does not support set_offset: it draws as the "
                "cpu's does, which keeps no offset");
  }
  uint64_t get_offset() const override {
    TORCH_CHECK(false,
                "tstor: a device generator does not support get_offset: it draws as the "
                "cpu's does, which keeps no offset");
  }
  uint64_t current_seed() const override { return cpu.current_seed(); }
  uint64_t seed() override {
    std::lock_guard<std::mutex> hold(cpu.mutex());
    return cpu.seed();
  }
  void set_state(const c10::TensorImpl &state) override {
    std::lock_guard<std::mutex> hold(cpu.mutex());
    cpu.unsafeGetGeneratorImpl()->set_state(state);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    at::Generator twin = cpu;
    std::lock_guard<std::mutex> hold(twin.mutex());
    return twin.unsafeGetGeneratorImpl()->get_state();
  }
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

 private:
  TstorGenerator *clone_impl() const override {
    at::Generator twin = cpu;
    std::lock_guard<std::mutex> hold(twin.mutex());
    return new TstorGenerator(device().index(), twin.clone());
  }
};

c10::DeviceIndex checked_index(c10::DeviceIndex index) {
  if (index < 0) index = current_device();
  tstor_dev(index); // raises for a device that does not exist
  return index;
}

// Each device's default generator, made on first use and kept for the
// process, as CUDA's are.
const at::Generator &default_generator(c10::DeviceIndex index) {
  static std::once_flag made[kMaxDevices];
  static at::Generator generators[kMaxDevices];
  index = checked_index(index);
  std::call_once(made[index],
                 [index] { generators[index] = at::make_generator<TstorGenerator>(index); });
  return generators[index];
}

bool is_generator(const c10::TypePtr &type) {
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  return type->kind() == c10::TypeKind::OptionalType &&
         type->castRaw<c10::OptionalType>()->getElementType()->kind() ==
             c10::TypeKind::GeneratorType;
}

// The device a call is on: its first device tensor's; -1 for none.
c10::DeviceIndex call_device(const torch::jit::Stack &stack, size_t first) {
  for (size_t i = first; i < stack.size(); i++) {
    const c10::IValue &arg = stack[i];
    if (arg.isTensor() && arg.toTensor().defined() && arg.toTensor().is_privateuseone())
      return arg.toTensor().device().index();
    if (arg.isTensorList())
      for (const at::Tensor &t : arg.toTensorList().vec())
        if (t.defined() && t.is_privateuseone()) return t.device().index();
  }
  return -1;
}

// ----------------------------------------------------- pinned host memory

AddressTable &pinned() {
  static AddressTable *table = new AddressTable; // never destroyed: deleters may run at exit
  return *table;
}

void release_pinned(void *ctx) {
  auto *s = static_cast<tstor_storage *>(ctx);
  pinned().remove(s);
  tstor_storage_release(s);
}

// cpu memory whose DataPtr holds a pinned tstor storage, kept by address
// for isPinnedPtr.
struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    tstor_storage *s = nullptr;
    check(tstor_storage_new_pinned(nullptr, nbytes, &s), "allocating pinned host memory");
    pinned().add(s);
    return {tstor_storage_data(s), s, &release_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void *dest, const void *src, size_t count) const override {
    default_copy_data(dest, src, count); // host memory
  }
};

// ------------------------------------------------ torch.accelerator memory

// The device allocator's bytes, with tstor_stats read as PyTorch's
// DeviceStats (aggregate pool only: tstor's allocators keep one).
struct TstorDeviceAllocator final : c10::DeviceAllocator {
  c10::DataPtr allocate(size_t nbytes) override { return device_allocator()->allocate(nbytes); }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void *dest, const void *src, size_t count) const override {
    device_allocator()->copy_data(dest, src, count);
  }
  bool initialized() override {
    try {
      return backend().count > 0;
    } catch (...) {
      return false;
    }
  }
  void emptyCache(c10::MempoolId_t) override {
    for (int index = 0; index < backend().count; index++)
      check(tstor_device_empty_cache(nullptr, tstor_dev(index)), "emptying the cache");
  }
  void recordStream(const c10::DataPtr &data, c10::Stream stream) override {
    c10::impl::VirtualGuardImpl(c10::DeviceType::PrivateUse1).recordDataPtrOnStream(data, stream);
  }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex index) override {
    tstor_stats st = TSTOR_STATS_INIT;
    check(tstor_device_stats(nullptr, tstor_dev(checked_index(index)), &st), "device statistics");
    c10::CachingDeviceAllocator::DeviceStats out;
    auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    auto set = [](c10::CachingAllocator::Stat &to, uint64_t current, uint64_t peak) {
      to.current = static_cast<int64_t>(current);
      to.peak = static_cast<int64_t>(peak);
    };
    set(out.allocated_bytes[all], st.allocated, st.peak_allocated);
    set(out.reserved_bytes[all], st.reserved, st.peak_reserved);
    set(out.active_bytes[all], st.active, st.peak_active);
    out.allocation[all].current = static_cast<int64_t>(st.alloc_count - st.free_count);
    out.allocation[all].allocated = static_cast<int64_t>(st.alloc_count);
    out.allocation[all].freed = static_cast<int64_t>(st.free_count);
    out.num_alloc_retries = static_cast<int64_t>(st.retries);
    out.num_ooms = static_cast<int64_t>(st.oom_count);
    return out;
  }
  void resetAccumulatedStats(c10::DeviceIndex) override {
    TORCH_CHECK(false,
                "tstor: allocation counts are kept for the process (tstor_stats); "
                "only the peaks reset");
  }
  void resetPeakStats(c10::DeviceIndex index) override {
    check(tstor_device_reset_peak(nullptr, tstor_dev(checked_index(index))), "resetting the peaks");
  }
  // Free and total bytes as the backend reports them
  // (tstor_device_get_properties); NotImplementedError where it does not.
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex index) override {
    return memory_info(checked_index(index));
  }
};

// ------------------------------------------------------------------ hooks

struct TstorHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override {
    try {
      return backend().count > 0;
    } catch (...) {
      return false;
    }
  }
  // PyTorch's lazy initialisation: the context opened as the library
  // loaded; a failure then is raised now, where Python can show it.
  void init() const override { backend(); }
  bool hasPrimaryContext(c10::DeviceIndex index) const override {
    return isAvailable() && index >= 0 && index < backend().count;
  }
  c10::DeviceIndex deviceCount() const override {
    return isAvailable() ? static_cast<c10::DeviceIndex>(backend().count) : 0;
  }
  void setCurrentDevice(c10::DeviceIndex index) const override { set_current_device(index); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) const override {
    c10::DeviceIndex old = current_device();
    set_current_device(index);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex index) const override {
    if (index < 0 || index >= deviceCount()) return current_device();
    return exchangeDevice(index);
  }
  const at::Generator &getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_generator(index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return at::make_generator<TstorGenerator>(checked_index(index));
  }
  at::Allocator *getPinnedMemoryAllocator() const override {
    static PinnedAllocator allocator;
    return &allocator;
  }
  bool isPinnedPtr(const void *data) const override {
    size_t offset;
    tstor_storage *s = pinned().find(cpu_dev().index, data, &offset);
    tstor_storage_release(s);
    return s != nullptr;
  }
  at::Device getDeviceFromPtr(void *data) const override {
    c10::DeviceIndex index = device_of_address(data);
    TORCH_CHECK(index >= 0, "tstor: ", data, " is not in a storage of this device");
    return at::Device(c10::DeviceType::PrivateUse1, index);
  }
  // UntypedStorage.resize_ on the device: a new allocation holding the
  // first min(old, new) bytes, copied by tstor.
  void resizePrivateUse1Bytes(const c10::Storage &storage, size_t nbytes) const override {
    c10::StorageImpl *st = storage.unsafeGetStorageImpl();
    TORCH_CHECK(st->resizable(), "Trying to resize storage that is not resizable");
    c10::impl::VirtualGuardImpl guard_impl(c10::DeviceType::PrivateUse1);
    c10::DeviceGuard guard(st->device());
    c10::DataPtr fresh = device_allocator()->allocate(nbytes);
    size_t keep = std::min(nbytes, st->nbytes());
    if (keep > 0) {
      tstor_storage *from = storage_of(st->data_ptr(), keep);
      tstor_storage *to = storage_of(fresh, keep);
      int rc = tstor_storage_copy(to, from);
      tstor_storage_release(to);
      tstor_storage_release(from);
      check(rc, "resizing a storage");
    }
    st->set_data_ptr_noswap(std::move(fresh));
    st->set_nbytes(nbytes);
  }
};

// ---------------------------------------------------- torch.ops.tstor: rng

c10::DeviceIndex device_arg(int64_t index) {
  return checked_index(static_cast<c10::DeviceIndex>(index < 0 ? -1 : index));
}

void manual_seed(int64_t index, int64_t seed) {
  at::Generator g = default_generator(device_arg(index));
  std::lock_guard<std::mutex> hold(g.mutex());
  g.set_current_seed(static_cast<uint64_t>(seed));
}

int64_t seed(int64_t index) {
  at::Generator g = default_generator(device_arg(index));
  std::lock_guard<std::mutex> hold(g.mutex());
  return static_cast<int64_t>(g.seed());
}

int64_t initial_seed(int64_t index) {
  return static_cast<int64_t>(default_generator(device_arg(index)).current_seed());
}

at::Tensor get_rng_state(int64_t index) {
  at::Generator g = default_generator(device_arg(index));
  std::lock_guard<std::mutex> hold(g.mutex());
  return g.get_state();
}

void set_offset(int64_t index, int64_t offset) {
  at::Generator g = default_generator(device_arg(index));
  std::lock_guard<std::mutex> hold(g.mutex());
  g.set_offset(static_cast<uint64_t>(offset));
}

int64_t get_offset(int64_t index) {
  at::Generator g = default_generator(device_arg(index));
  std::lock_guard<std::mutex> hold(g.mutex());
  return static_cast<int64_t>(g.get_offset());
}

void set_rng_state(int64_t index, const at::Tensor &state) {
  at::Generator g = default_generator(device_arg(index));
  std::lock_guard<std::mutex> hold(g.mutex());
  g.set_state(state);
}

} // namespace

void generators_to_cpu(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  const std::vector<c10::Argument> &args = op.schema().arguments();
  size_t first = stack->size() - args.size();
  for (size_t i = 0; i < args.size(); i++) {
    if (!is_generator(args[i].type())) continue;
    c10::IValue &arg = (*stack)[first + i];
    at::Generator g;
    if (arg.isNone()) {
      c10::DeviceIndex index = call_device(*stack, first);
      if (index < 0) continue;
      g = default_generator(index);
    } else {
      g = arg.toGenerator();
      if (g.device().type() != c10::DeviceType::PrivateUse1) continue;
    }
    arg = c10::IValue(g.get<TstorGenerator>()->cpu);
  }
}

// cuda's autocast policy for the device: the KERNEL_PRIVATEUSEONE macros
// register into a torch::Library named m.
void register_autocast() {
  static std::unique_ptr<torch::Library> ops, rest;
  ops = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                         c10::DispatchKey::AutocastPrivateUse1, __FILE__, __LINE__);
  torch::Library &m = *ops;
  // The lists' signatures name at's types unqualified, and which types
  // differs by version (2.11's name DimnameList, which 2.15 no longer has).
  using namespace at;
#define TSTOR_AUTOCAST_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define TSTOR_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define TSTOR_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define TSTOR_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(TSTOR_AUTOCAST_LOWER)
  AT_FORALL_FP32(TSTOR_AUTOCAST_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(TSTOR_AUTOCAST_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(TSTOR_AUTOCAST_PROMOTE)
#undef TSTOR_AUTOCAST_LOWER
#undef TSTOR_AUTOCAST_FP32
#undef TSTOR_AUTOCAST_FP32_SET_OPT_DTYPE
#undef TSTOR_AUTOCAST_PROMOTE
  rest = std::make_unique<torch::Library>(
      torch::Library::IMPL, "_", c10::DispatchKey::AutocastPrivateUse1, __FILE__, __LINE__);
  rest->fallback(torch::CppFunction::makeFallthrough());
}

void register_torch2(torch::Library &defs) {
  static TstorHooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
  static TstorDeviceAllocator allocator;
  c10::SetAllocator(c10::DeviceType::PrivateUse1, &allocator); // in place of the plain one
  register_autocast();
  defs.def("manual_seed(int device, int seed) -> ()", manual_seed);
  defs.def("seed(int device=-1) -> int", seed);
  defs.def("initial_seed(int device=-1) -> int", initial_seed);
  defs.def("get_rng_state(int device=-1) -> Tensor", get_rng_state);
  defs.def("set_rng_state(int device, Tensor state) -> ()", set_rng_state);
  defs.def("set_offset(int device, int offset) -> ()", set_offset);
  defs.def("get_offset(int device=-1) -> int", get_offset);
}

} // namespace tstor_torch
