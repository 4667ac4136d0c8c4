/* libFuzzer target: tstor's GGUF reader over arbitrary bytes, read,
 * borrowed (the path a mapped file takes) and from a file (the default way,
 * the header read with pread, again longer when it does not fit), as
 * fuzz_safetensors does. A load that succeeds is walked whole, metadata
 * included, and its quantized tensors decoded. Seeds:
 * tests/fuzz/corpus-gguf (the golden, crafted and hostile files of
 * tests/gguf). */
#include "ckpt_walk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  load_every_way(tstor_gguf_load_buffer, tstor_gguf_load, data, size);
  return 0;
}
