/* libFuzzer target: tstor's safetensors reader over arbitrary bytes, read and
 * borrowed (the path a mapped file takes), as fuzz_torch_load does for
 * torch.save files. Seeds: tests/fuzz/corpus-safetensors. */
#include "ckpt_walk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  load_both_ways(tstor_safetensors_load_buffer, data, size);
  return 0;
}
