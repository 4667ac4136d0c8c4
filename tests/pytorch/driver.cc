// libtstor-torch through libtorch's C++ API, for a memory checker: what
// test_device.py does from Python (a tensor to the device, views, the cpu
// fallback, a linear layer's forward and backward), in a process valgrind can watch
// whole. Every byte tstor handed to PyTorch must come back when the tensors
// die: tstor's allocated count on each device is compared before and after.
// Usage: pytorch_driver PATH/TO/libtstor-torch.so
#include <torch/torch.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

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
  expect(allocated(0) == before[0] && allocated(1) == before[1],
         "every byte back to tstor when the tensors die");
  std::printf("%s\n", failures ? "failed" : "ok");
  return failures ? 1 : 0;
}
