/* libFuzzer target: tstor's torch.save reader over arbitrary bytes.
 *
 * Each input is loaded from memory twice: read (libzip inflates and checks
 * every record) and borrowed (records become views of the input, through
 * tstor's own central-directory reader, the path a mapped file takes); and
 * from a file (a memfd), the default way, where that reader works through
 * pread. Every way it must load or fail with a TSTOR_E* code and a message,
 * never crash, hang or leak, and the file must give the buffer's result. A load that succeeds is walked entirely (every value, every
 * tensor's elements read through its strides), so that whatever the tree
 * holds is safe to use. The seeds are tests/fuzz/corpus-torch_load (torch.save
 * files and the hostile ones of tests/ckpt).
 *
 * Environment: TSTOR_BACKEND_DIR (the modules), as tests/fuzz/run.sh sets it. */
#include "ckpt_walk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  load_every_way(tstor_torch_load_buffer, tstor_torch_load, data, size);
  return 0;
}
