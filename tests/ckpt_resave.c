/* ckpt_resave OUTDIR FILE...: loads each torch.save file with tstor and saves
 * it again as OUTDIR/BASENAME, for ckpt/roundtrip.sh to have PyTorch read. */
#define _GNU_SOURCE
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tstor/serialize.h>

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: ckpt_resave OUTDIR FILE...\n");
    return 2;
  }
  int status = 0;
  for (int i = 2; i < argc; i++) {
    tstor_checkpoint *ck;
    char *copy = strdup(argv[i]), *out = NULL;
    if (asprintf(&out, "%s/%s", argv[1], basename(copy)) < 0) return 1;
    int rc = tstor_torch_load(NULL, argv[i], NULL, &ck);
    if (!rc) {
      rc = tstor_torch_save(ck, out);
      tstor_checkpoint_free(ck);
    }
    if (rc) {
      fprintf(stderr, "%s: %s: %s\n", argv[i], tstor_err_name(rc), tstor_last_error());
      status = 1;
    }
    free(out);
    free(copy);
  }
  return status;
}
