// libtstor-torch's internal header, shared by its two parts and not
// installed:
//   tstor_torch.cc  the device on both PyTorch lines: the tstor device type
//                   behind PrivateUse1, the allocator, the device guard with
//                   its streams and events, the kernels, the torch.ops.tstor
//                   operators, and the registration;
//   torch2.cc       what PyTorch 2.x asks of a device besides: the
//                   PrivateUse1 hooks (generators, pinned host memory), and
//                   the random-number operators of the device module.
// Built once per PyTorch line: against Debian's libtorch 1.13
// (libtstor-torch.so) and against a torch 2.x wheel (libtstor-torch2.so,
// with torch2.cc). Where the two lines' shared interfaces differ is said
// once, below; everything else is the same source.
#ifndef TSTOR_TORCH_H
#define TSTOR_TORCH_H

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>
#include <torch/library.h>
#include <torch/version.h>

#include <tstor/tstor.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

// ------------------------------------------------------- the two PyTorch lines

// What differs between PyTorch 1.13 and 2.x in the interfaces both lines
// use, in one place: 2.x's Allocator::allocate is not const, and 2.x asks an
// allocator to copy between its own allocations (Allocator::copy_data, for
// Allocator::clone); 2.x's device guard creates streams (getNewStream) and
// synchronizes events and whole devices. TSTOR_TORCH_2 guards those members
// and torch2.cc's registration, nothing else.
#if TORCH_VERSION_MAJOR >= 2
#define TSTOR_TORCH_2 1
#define TSTOR_ALLOCATE_CONST
#else
#define TSTOR_TORCH_2 0
#define TSTOR_ALLOCATE_CONST const
#endif

namespace tstor_torch {

// The tstor device type behind PrivateUse1, found once, as the library
// loads. backend() raises (c10::Error, a Python RuntimeError) with the
// reason when there is none.
struct Backend {
  int type = -1;
  int count = 0;
  std::string name;
  std::string error;
};
const Backend &backend();

// Device `index` of that type, checked; the cpu; a failed tstor call raised
// with tstor's message.
tstor_device tstor_dev(c10::DeviceIndex index);
tstor_device cpu_dev();
void check(int rc, const char *what);

// The calling thread's current device (the device guard's).
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);

// Storages by the addresses of their bytes, per device index: the
// allocator's live allocations (live()), torch2.cc's pinned host memory.
// PyTorch makes DataPtrs of its own into those bytes (a slice of an untyped
// storage has the base's StorageImpl as its context), and some of its hooks
// ask about a bare pointer: both are answered from here.
class AddressTable {
 public:
  void add(tstor_storage *s);
  void remove(tstor_storage *s);
  // The storage on device `index` holding the byte at p, as a new
  // reference, and the byte's offset in it; nullptr where none does.
  tstor_storage *find(int index, const void *p, size_t *offset);

 private:
  static std::pair<int, uintptr_t> key(const tstor_storage *s);
  std::mutex lock_;
  std::map<std::pair<int, uintptr_t>, tstor_storage *> by_address_;
};

// The allocator of the device's bytes.
c10::Allocator *device_allocator();

// The tstor storage of exactly `nbytes` at p, a PrivateUse1 DataPtr: the
// allocation itself, or a view of the one that holds them, or (for bytes the
// library did not allocate) a borrowed wrap of them. A new reference.
tstor_storage *storage_of(const c10::DataPtr &p, size_t nbytes);

// The device an address of one of the allocator's live allocations is on;
// -1 where none holds it.
c10::DeviceIndex device_of_address(const void *p);

// What device `index` reports of itself (tstor_device_get_properties), and
// its free and total bytes from it: raised as NotImplementedError where the
// backend does not report both (the device module's mem_get_info, 2.x's
// DeviceAllocator::getMemoryInfo).
tstor_device_properties properties_of(c10::DeviceIndex index);
std::pair<size_t, size_t> memory_info(c10::DeviceIndex index);

#if TSTOR_TORCH_2
// torch2.cc: registers the hooks and the generators, and defines the
// random-number operators in `defs` (the tstor namespace).
void register_torch2(torch::Library &defs);

// For the cpu fallback: each generator argument of a call on the device (a
// device generator, or none for the device's default one) becomes the cpu
// generator behind it, which the cpu kernel can draw from.
void generators_to_cpu(const c10::OperatorHandle &op, torch::jit::Stack *stack);
#endif

} // namespace tstor_torch

#endif
