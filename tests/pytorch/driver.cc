// libtstor-torch through libtorch's C++ API, for a memory checker: what
// test_device.py does from Python (a tensor to the device, views, the cpu
// fallback, a linear layer's forward and backward), in a process valgrind can watch
// whole. Every byte tstor handed to PyTorch must come back when the tensors
// die: tstor's allocated count on each device is compared before and after.
// It also drives the device guard's streams and events, which 1.13 offers
// PrivateUse1 from C++ only (c10::Stream, c10::StreamGuard, c10::Event).
// Usage: pytorch_driver PATH/TO/libtstor-torch.so
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/torch.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>

namespace {

int failures = 0;

void expect(bool ok, const char *what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what);
    failures++;
  }
}

int64_t allocated(int64_t device) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("tstor::memory_allocated", "")
                       .typed<int64_t(int64_t)>();
  return op.call(device);
}

void work() {
  const torch::Device dev(torch::kPrivateUse1, 1);
  auto ref = torch::arange(12., torch::kFloat).reshape({3, 4});
  auto x = ref.to(dev);
  auto y = (x.t() * 2).contiguous();
  expect(y.device() == dev, "the result lives on privateuseone:1");
  expect(torch::equal(y.cpu(), ref.t() * 2), "(x.t() * 2).contiguous() as on the cpu");
  expect(allocated(1) > 0, "the device holds tstor storages");

  // a linear layer's forward and backward, its parameters leaves on the
  // device (libtorch's Module::to cannot move a parameter across to
  // PrivateUse1: set_data wants the same tensor type on both sides)
  torch::manual_seed(0);
  auto w_cpu = torch::randn({2, 4}).requires_grad_();
  auto b_cpu = torch::randn({2}).requires_grad_();
  auto w = w_cpu.detach().to(dev).requires_grad_();
  auto b = b_cpu.detach().to(dev).requires_grad_();
  auto loss = torch::nn::functional::linear(x, w, b).pow(2).sum();
  loss.backward();
  auto cpu_loss = torch::nn::functional::linear(ref, w_cpu, b_cpu).pow(2).sum();
  cpu_loss.backward();
  expect(torch::allclose(loss.cpu(), cpu_loss), "the loss as on the cpu");
  expect(torch::allclose(w.grad().cpu(), w_cpu.grad()), "the weight's gradient as on the cpu");
  expect(torch::allclose(b.grad().cpu(), b_cpu.grad()), "the bias's gradient as on the cpu");
}

// Streams and events: the default stream, the pool, the current stream per
// thread, events recorded, waited for and queried, and a bad stream refused.
void streams() {
  const c10::Device dev(c10::DeviceType::PrivateUse1, 1);
  c10::impl::VirtualGuardImpl impl(c10::DeviceType::PrivateUse1);
  const c10::Stream def = impl.getDefaultStream(dev);
  expect(def.id() == 0 && def.device() == dev, "the default stream is stream 0 of the device");
  expect(impl.getStream(dev) == def, "the current stream starts as the default one");

  std::set<c10::StreamId> ids;
  for (int i = 0; i < 8; i++) ids.insert(impl.getStreamFromGlobalPool(dev).id());
  expect(ids.size() == 8 && *ids.begin() == 1 && *ids.rbegin() == 8,
         "the pool hands out eight streams, 1 to 8, round robin");
  expect(ids.count(impl.getStreamFromGlobalPool(dev).id()) == 1, "the pool wraps around");

  const c10::Stream s1 = impl.getStreamFromGlobalPool(dev), s2 = impl.getStreamFromGlobalPool(dev);
  expect(s1 != s2, "two pool streams in a row differ");
  auto ref = torch::arange(6., torch::kFloat);
  {
    c10::StreamGuard on(s1);
    expect(impl.getStream(dev) == s1, "StreamGuard makes s1 current");
    bool other_thread_default = false;
    std::thread([&] { other_thread_default = impl.getStream(dev) == def; }).join();
    expect(other_thread_default, "the current stream is per thread");
    auto x = ref.to(dev);
    expect(torch::equal((x * 3).cpu(), ref * 3), "work while s1 is current, as on the cpu");
    impl.recordDataPtrOnStream(x.storage().data_ptr(), s1);
  }
  expect(impl.getStream(dev) == def, "the guard restores the default stream");

  c10::Event never(c10::DeviceType::PrivateUse1);
  expect(never.query(), "an event never recorded has happened");
  c10::Event e(c10::DeviceType::PrivateUse1);
  e.record(s1);
  e.block(s2);
  impl.synchronizeStream(s2);
  expect(e.query(), "an event s2 waited for has happened");
  expect(impl.queryStream(s1) && impl.queryStream(s2) && impl.queryStream(def),
         "synchronized streams are idle");
  e.record(def);
  impl.synchronizeStream(def);
  expect(e.query(), "an event recorded again, on the default stream");

  bool refused = false;
  try {
    impl.synchronizeStream(c10::Stream(c10::Stream::UNSAFE, dev, 99));
  } catch (const c10::Error &err) {
    refused = std::string(err.what()).find("is not a stream of this device") != std::string::npos;
  }
  expect(refused, "a stream id past the pool is refused");
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PATH/TO/libtstor-torch.so\n", argv[0]);
    return 2;
  }
  if (!dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) {
    std::fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
    return 1;
  }
  int64_t before[2] = {allocated(0), allocated(1)};
  work();
  streams();
  expect(allocated(0) == before[0] && allocated(1) == before[1],
         "every byte back to tstor when the tensors die");
  std::printf("%s\n", failures ? "failed" : "ok");
  return failures ? 1 : 0;
}
