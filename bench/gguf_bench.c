/* gguf_bench [--reps N] FILE...: times tstor's loads of GGUF files, in one
 * process, the files warm in the page cache: mapped (TSTOR_LOAD_MMAP) and
 * read into memory (the default). Prints one line per file and variant:
 * "FILE VARIANT median_us best_us tensors". The first load of each file is
 * not counted (it faults in the library's and the file's pages).
 * bench/gguf_vs_reader.py runs it beside the gguf package's GGUFReader. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tstor/serialize.h>

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* reps timed loads of path with flags (after one untimed); 0 or 1. */
static int run(tstor_context *ctx, const char *path, const char *label, unsigned flags, int reps) {
  double *t = calloc((size_t)reps, sizeof *t);
  size_t ntensors = 0;
  if (!t) return 1;
  for (int r = -1; r < reps; r++) {
    tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
    tstor_checkpoint *ck;
    o.flags = flags;
    double t0 = now_us();
    if (tstor_gguf_load(ctx, path, &o, &ck)) {
      fprintf(stderr, "%s: %s\n", path, tstor_last_error());
      free(t);
      return 1;
    }
    if (r >= 0) t[r] = now_us() - t0;
    ntensors = tstor_value_len(tstor_checkpoint_root(ck));
    tstor_checkpoint_free(ck);
  }
  qsort(t, (size_t)reps, sizeof *t, cmp);
  printf("%s %s %.3f %.3f %zu\n", path, label, t[reps / 2], t[0], ntensors);
  free(t);
  return 0;
}

int main(int argc, char **argv) {
  int reps = 20, first = 1;
  if (argc > 2 && strcmp(argv[1], "--reps") == 0) {
    reps = atoi(argv[2]);
    first = 3;
  }
  if (reps < 1 || first >= argc) {
    fprintf(stderr, "usage: gguf_bench [--reps N] FILE...\n");
    return 2;
  }
  tstor_context *ctx;
  if (tstor_context_open(NULL, &ctx)) {
    fprintf(stderr, "%s\n", tstor_last_error());
    return 1;
  }
  int rc = 0;
  for (int i = first; i < argc && !rc; i++) {
    rc = run(ctx, argv[i], "mapped", TSTOR_LOAD_MMAP, reps);
    if (!rc) rc = run(ctx, argv[i], "read", 0, reps);
  }
  tstor_context_close(ctx);
  return rc;
}
