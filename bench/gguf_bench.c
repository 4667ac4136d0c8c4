/* gguf_bench [--reps N] FILE...: times tstor's loads of GGUF files, in one
 * process, the files warm in the page cache: mapped (TSTOR_LOAD_MMAP) and
 * read into memory (the default). Prints one line per file and variant:
 * "FILE VARIANT median_us best_us tensors". The loads go round the files
 * and variants in turn, REPS times, after one round not counted (it faults
 * in the library's and the files' pages). glibc's heap is padded by 64 MiB
 * (M_TOP_PAD), as a long-running program's heap is: otherwise each load
 * that frees the heap's top (a vocabulary's 32,000 strings) has it handed
 * back to the system and faulted in again by the next load, 1,200 page
 * faults and 2 ms a load of the metadata-only file, a cost of the loop and
 * not of the load.
 * bench/gguf_vs_reader.py runs it beside the gguf package's GGUFReader. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
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

/* One load of path with flags, its time in *us; 0 or 1. */
static int load_once(tstor_context *ctx, const char *path, unsigned flags, double *us,
                     size_t *ntensors) {
  tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
  tstor_checkpoint *ck;
  o.flags = flags;
  double t0 = now_us();
  if (tstor_gguf_load(ctx, path, &o, &ck)) {
    fprintf(stderr, "%s: %s\n", path, tstor_last_error());
    return 1;
  }
  *us = now_us() - t0;
  *ntensors = tstor_value_len(tstor_checkpoint_root(ck));
  tstor_checkpoint_free(ck);
  return 0;
}

static const struct {
  const char *label;
  unsigned flags;
} variants[] = {{"mapped", TSTOR_LOAD_MMAP}, {"read", 0}};
enum { NVARIANTS = sizeof variants / sizeof variants[0] };

/* reps rounds (after one untimed), each loading every file every way in
 * turn, so that whatever else the machine does weighs on all alike. */
static int run(tstor_context *ctx, char **paths, int nfiles, int reps) {
  size_t cells = (size_t)nfiles * NVARIANTS;
  double *t = calloc(cells * (size_t)reps, sizeof *t);
  size_t *ntensors = calloc(cells, sizeof *ntensors);
  int rc = !t || !ntensors;
  for (int r = -1; r < reps && !rc; r++)
    for (size_t c = 0; c < cells && !rc; c++) {
      double us = 0;
      rc = load_once(ctx, paths[c / NVARIANTS], variants[c % NVARIANTS].flags, &us, &ntensors[c]);
      if (r >= 0) t[c * (size_t)reps + (size_t)r] = us;
    }
  for (size_t c = 0; c < cells && !rc; c++) {
    double *ct = t + c * (size_t)reps;
    qsort(ct, (size_t)reps, sizeof *ct, cmp);
    printf("%s %s %.3f %.3f %zu\n", paths[c / NVARIANTS], variants[c % NVARIANTS].label,
           ct[reps / 2], ct[0], ntensors[c]);
  }
  free(t);
  free(ntensors);
  return rc;
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
#ifdef __GLIBC__
  mallopt(M_TOP_PAD, 64 << 20);
#endif
  tstor_context *ctx;
  if (tstor_context_open(NULL, &ctx)) {
    fprintf(stderr, "%s\n", tstor_last_error());
    return 1;
  }
  int rc = run(ctx, argv + first, argc - first, reps);
  tstor_context_close(ctx);
  return rc;
}
