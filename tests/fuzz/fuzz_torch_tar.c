/* libFuzzer target: the reader of torch.save's tar format (PyTorch 0.1's
 * archives of sys_info, pickle, tensors and storages) over arbitrary bytes.
 *
 * The same harness as fuzz_torch_load.c (each input loaded read, borrowed
 * and from a file, the three agreeing, every loaded value walked), with the
 * seeds and the dictionary of this format: tests/fuzz/corpus-torch_tar,
 * golden and hostile archives of tests/ckpt/tar*, cut after their last
 * member (tarfile ends an archive at the end of the file as at a block of
 * zeros), so that mutations land on headers, pickles and layouts rather
 * than on a record's padding; tests/fuzz/torch_tar.dict, the tar header's
 * magic and type flags, the PAX keywords, the member names and the pickle
 * opcodes of the headers.
 *
 * Environment: TSTOR_BACKEND_DIR (the modules), as tests/fuzz/run.sh sets it. */
#include "ckpt_walk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  load_every_way(tstor_torch_load_buffer, tstor_torch_load, data, size);
  return 0;
}
