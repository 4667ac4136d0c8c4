/* libFuzzer target: tstor's safetensors reader over arbitrary bytes, read,
 * borrowed (the path a mapped file takes) and from a file (the default way),
 * as fuzz_torch_load does for torch.save files. Seeds: tests/fuzz/corpus-safetensors. */
#include "ckpt_walk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  load_every_way(tstor_safetensors_load_buffer, tstor_safetensors_load, data, size);
  return 0;
}
