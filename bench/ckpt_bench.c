/* ckpt_bench PT SAFETENSORS [REPS] [--cold] [--variant N]: times tstor's loads of one
 * checkpoint in both formats: read into memory (the default), mapped
 * (TSTOR_LOAD_MMAP), and mapped then every page of every tensor touched once
 * (what the first use of the weights costs). Prints one line per variant:
 * the median and the best of REPS runs, in milliseconds, and the tensor
 * count. --cold drops both files from the page cache before every load
 * (posix_fadvise DONTNEED), so that each reads from the disk. --variant N
 * runs the Nth line alone (from 0), so that no variant meets memory an
 * earlier one had the allocator keep.
 * bench/ckpt_vs_torch.py runs it beside torch.load of the same file.
 *
 * ckpt_bench --any FILE REPS [--mmap]: tstor_checkpoint_load of a file of any
 * format, REPS times, and one line "tensors N median_ms M best_ms B"; the free
 * of each load is not timed. bench/many_tensors.py runs it on files of many
 * small tensors beside torch.load, safe_open and torchfile. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <tstor/serialize.h>
#include <tstor/tensor.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static volatile unsigned char sink;

/* Reads one byte of every 4 KiB page of every tensor in the tree. */
static void touch(const tstor_value *v) {
  if (tstor_value_kind_of(v) == TSTOR_VALUE_TENSOR) {
    tstor_tensor *t = tstor_value_tensor(v);
    const unsigned char *p = tstor_tensor_data(t);
    int64_t n = tstor_tensor_nbytes(t); /* the benchmark's tensors are contiguous */
    for (int64_t i = 0; i < n; i += 4096) sink ^= p[i];
    return;
  }
  for (size_t i = 0; i < tstor_value_len(v); i++) touch(tstor_value_item(v, i));
}

static size_t count_tensors(const tstor_value *v) {
  if (tstor_value_kind_of(v) == TSTOR_VALUE_TENSOR) return 1;
  size_t n = 0;
  for (size_t i = 0; i < tstor_value_len(v); i++) n += count_tensors(tstor_value_item(v, i));
  return n;
}

typedef int (*loader)(tstor_context *, const char *, const tstor_load_options *, tstor_checkpoint **);

static const char *cold_files[2];

/* Drops the files' pages from the page cache (they are clean: nothing to
 * write back), as after a reboot. */
static void evict(void) {
  for (int i = 0; i < 2 && cold_files[i]; i++) {
    int fd = open(cold_files[i], O_RDONLY);
    if (fd < 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) {
      perror(cold_files[i]);
      exit(1);
    }
    close(fd);
  }
}

/* Loads path REPS times (t: their times, sorted); the tensor count. */
static size_t time_loads(tstor_context *ctx, loader load, const char *path, unsigned flags,
                         int do_touch, int reps, double *t) {
  size_t ntensors = 0;
  for (int r = 0; r < reps; r++) {
    tstor_load_options o = {sizeof o, "cpu", flags};
    tstor_checkpoint *ck;
    if (cold_files[0]) evict();
    double t0 = now_ms();
    int rc = load(ctx, path, &o, &ck);
    if (rc) {
      fprintf(stderr, "%s: %s\n", path, tstor_last_error());
      exit(1);
    }
    if (do_touch) touch(tstor_checkpoint_root(ck));
    t[r] = now_ms() - t0;
    ntensors = count_tensors(tstor_checkpoint_root(ck));
    tstor_checkpoint_free(ck);
  }
  qsort(t, (size_t)reps, sizeof *t, cmp);
  return ntensors;
}

static void run(tstor_context *ctx, const char *label, loader load, const char *path,
                unsigned flags, int do_touch, int reps) {
  double *t = calloc((size_t)reps, sizeof *t);
  size_t ntensors = time_loads(ctx, load, path, flags, do_touch, reps, t);
  printf("%-36s median %10.3f ms  best %10.3f ms  %zu tensors\n", label, t[reps / 2], t[0], ntensors);
  free(t);
}

static tstor_context *open_context(void) {
  tstor_context *ctx;
  if (tstor_context_open(NULL, &ctx)) {
    fprintf(stderr, "%s\n", tstor_last_error());
    exit(1);
  }
  return ctx;
}

/* ckpt_bench --any FILE REPS [--mmap] */
static int run_any(int argc, char **argv) {
  int reps = argc > 3 ? atoi(argv[3]) : 5;
  if (reps < 1) reps = 1;
  unsigned flags = argc > 4 && strcmp(argv[4], "--mmap") == 0 ? TSTOR_LOAD_MMAP : 0;
  tstor_context *ctx = open_context();
  double *t = calloc((size_t)reps, sizeof *t);
  size_t ntensors = time_loads(ctx, tstor_checkpoint_load, argv[2], flags, 0, reps, t);
  printf("tensors %zu median_ms %.3f best_ms %.3f\n", ntensors, t[reps / 2], t[0]);
  free(t);
  tstor_context_close(ctx);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr,
            "usage: ckpt_bench FILE.pt FILE.safetensors [REPS] [--cold] [--variant N]\n"
            "       ckpt_bench --any FILE [REPS] [--mmap]\n");
    return 2;
  }
  if (strcmp(argv[1], "--any") == 0) return run_any(argc, argv);
  int reps = argc > 3 ? atoi(argv[3]) : 5;
  if (reps < 1) reps = 1;
  int only = -1;
  for (int i = 4; i < argc; i++) {
    if (strcmp(argv[i], "--cold") == 0) {
      cold_files[0] = argv[1];
      cold_files[1] = argv[2];
    } else if (strcmp(argv[i], "--variant") == 0 && i + 1 < argc) {
      only = atoi(argv[++i]);
    }
  }
  tstor_context *ctx = open_context();
  static const struct {
    const char *label;
    int safetensors;
    unsigned flags;
    int touch;
  } variants[] = {
      {"tstor .pt read (default)", 0, 0, 0},
      {"tstor .pt mapped", 0, TSTOR_LOAD_MMAP, 0},
      {"tstor .pt mapped + touch every page", 0, TSTOR_LOAD_MMAP, 1},
      {"tstor .safetensors read (default)", 1, 0, 0},
      {"tstor .safetensors mapped", 1, TSTOR_LOAD_MMAP, 0},
      {"tstor .safetensors mapped + touch", 1, TSTOR_LOAD_MMAP, 1},
  };
  for (int v = 0; v < (int)(sizeof variants / sizeof variants[0]); v++)
    if (only < 0 || only == v)
      run(ctx, variants[v].label, variants[v].safetensors ? tstor_safetensors_load : tstor_torch_load,
          argv[1 + variants[v].safetensors], variants[v].flags, variants[v].touch, reps);
  tstor_context_close(ctx);
  return 0;
}
