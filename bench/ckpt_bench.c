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
 * small tensors beside torch.load, safe_open and torchfile.
 *
 * ckpt_bench --fresh FILE VARIANT [--cold]: one run of one side of the fresh-memory
 * bound (bench/ckpt_vs_torch.py --fresh runs them in rounds), and one line
 * "ms T minflt F majflt J thp_kib H": the time, the page faults
 * (getrusage) and the anonymous memory in transparent huge pages afterwards
 * (/proc/self/smaps_rollup). VARIANT "load" is the default load of FILE
 * (tstor_checkpoint_load, read into memory) with every page then touched;
 * the others are the bound: the same records (their offsets and sizes taken
 * from a mapped load beforehand, untimed), each read with pread into memory
 * allocated for it alone, on as many threads as the load reads with, each
 * thread allocating the records it reads. "malloc": malloc; "populate":
 * mmap with MAP_POPULATE; "huge": mmap aligned to 2 MiB with
 * madvise(MADV_HUGEPAGE); "huge-populate": the same, then
 * madvise(MADV_POPULATE_WRITE). --cold drops the file from the page cache
 * (posix_fadvise) just before the timed part. ckpt_bench --threads prints that thread
 * count. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
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

/* ------------------------------------------------- the fresh-memory bound */

typedef struct record {
  uint64_t off;
  size_t len;
  void *mem;
  size_t mapped; /* bytes mmap gave (0: malloc) */
} record;

typedef enum { FRESH_MALLOC, FRESH_POPULATE, FRESH_HUGE, FRESH_HUGE_POPULATE } fresh_kind;

typedef struct fresh_run {
  record *recs;
  size_t n;
  int fd;
  fresh_kind kind;
  atomic_size_t next;
  atomic_int failed;
} fresh_run;

#define HUGE_2M ((size_t)2 << 20)

/* Memory for one record, as the variant allocates it; NULL on failure. */
static void *fresh_alloc(fresh_kind kind, record *r) {
  if (kind == FRESH_MALLOC) return malloc(r->len ? r->len : 1);
  size_t len = (r->len + HUGE_2M - 1) & ~(HUGE_2M - 1);
  if (kind == FRESH_POPULATE) {
    void *p =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) return NULL;
    r->mapped = len;
    return p;
  }
  /* one huge page more, trimmed to a 2 MiB boundary, as the cpu backend does */
  size_t span = len + HUGE_2M;
  char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  char *start = (char *)(((uintptr_t)p + HUGE_2M - 1) & ~(uintptr_t)(HUGE_2M - 1));
  if (start > p) munmap(p, (size_t)(start - p));
  size_t tail = (size_t)(p + span - (start + len));
  if (tail) munmap(start + len, tail);
  madvise(start, len, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_WRITE
  if (kind == FRESH_HUGE_POPULATE) madvise(start, len, MADV_POPULATE_WRITE);
#endif
  r->mapped = len;
  return start;
}

static void *fresh_thread(void *arg) {
  fresh_run *f = arg;
  for (;;) {
    size_t i = atomic_fetch_add(&f->next, 1);
    if (i >= f->n || atomic_load(&f->failed)) return NULL;
    record *r = &f->recs[i];
    char *p = r->mem = fresh_alloc(f->kind, r);
    for (size_t done = 0; p && done < r->len;) {
      ssize_t got = pread(f->fd, p + done, r->len - done, (off_t)(r->off + done));
      if (got <= 0) {
        p = NULL;
        break;
      }
      done += (size_t)got;
    }
    if (!p) atomic_store(&f->failed, 1);
  }
}

/* The records of path: each storage's offset in the file and its size, from
 * a mapped load (where every storage is a view of the file). */
static record *records_of(tstor_context *ctx, const char *path, size_t *n) {
  tstor_load_options o = {sizeof o, "cpu", TSTOR_LOAD_MMAP};
  tstor_checkpoint *ck;
  if (tstor_checkpoint_load(ctx, path, &o, &ck)) {
    fprintf(stderr, "%s: %s\n", path, tstor_last_error());
    exit(1);
  }
  *n = tstor_checkpoint_storage_count(ck);
  record *recs = calloc(*n ? *n : 1, sizeof *recs);
  for (size_t i = 0; i < *n; i++) {
    const char *key;
    tstor_storage *s;
    tstor_checkpoint_storage(ck, i, &key, &s);
    if (!tstor_storage_base(s)) {
      fprintf(stderr, "%s: storage '%s' is not a view of the file\n", path, key);
      exit(1);
    }
    recs[i] = (record){tstor_storage_offset(s), tstor_storage_nbytes(s), NULL, 0};
  }
  tstor_checkpoint_free(ck);
  return recs;
}

/* The threads the load reads with: the library's thread count, at most 8
 * (TSTOR__READ_THREADS_MAX). */
static int load_threads(void) {
  int t = tstor_get_num_threads();
  return t > 8 ? 8 : t;
}

/* Anonymous memory in transparent huge pages now, in KiB (-1: unknown). */
static long thp_kib(void) {
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) break;
  fclose(f);
  return kib;
}

/* Drops path's pages from the page cache: 0, or 1 with a message. */
static int evict_file(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) {
    perror(path);
    if (fd >= 0) close(fd);
    return 1;
  }
  close(fd);
  return 0;
}

/* ckpt_bench --fresh FILE VARIANT [--cold] */
static int run_fresh(const char *path, const char *variant, int cold) {
  static const char *const kinds[] = {"malloc", "populate", "huge", "huge-populate"};
  int kind = -1;
  for (int i = 0; i < 4; i++)
    if (strcmp(variant, kinds[i]) == 0) kind = i;
  if (kind < 0 && strcmp(variant, "load") != 0) {
    fprintf(stderr, "ckpt_bench --fresh: unknown variant '%s'\n", variant);
    return 2;
  }
  tstor_context *ctx = open_context();
  size_t n = 0;
  record *recs = kind >= 0 ? records_of(ctx, path, &n) : NULL;
  int fd = kind >= 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
  if (kind >= 0 && fd < 0) {
    perror(path);
    return 1;
  }
  /* the mapped load above read the whole file into the page cache (the
   * kernel reads around each fault): cold means dropped again here */
  if (cold && evict_file(path)) return 1;
  tstor_checkpoint *ck = NULL;
  struct rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  double t0 = now_ms();
  if (kind < 0) {
    tstor_load_options o = {sizeof o, "cpu", 0};
    if (tstor_checkpoint_load(ctx, path, &o, &ck)) {
      fprintf(stderr, "%s: %s\n", path, tstor_last_error());
      return 1;
    }
    touch(tstor_checkpoint_root(ck));
  } else {
    fresh_run f = {recs, n, fd, (fresh_kind)kind, 0, 0};
    int threads = load_threads();
    pthread_t ids[8];
    int started = 0;
    while (started < threads - 1 && pthread_create(&ids[started], NULL, fresh_thread, &f) == 0)
      started++;
    fresh_thread(&f);
    for (int i = 0; i < started; i++) pthread_join(ids[i], NULL);
    if (f.failed) {
      fprintf(stderr, "%s: a record could not be allocated or read\n", path);
      return 1;
    }
  }
  double ms = now_ms() - t0;
  getrusage(RUSAGE_SELF, &r1);
  printf("ms %.3f minflt %ld majflt %ld thp_kib %ld\n", ms, r1.ru_minflt - r0.ru_minflt,
         r1.ru_majflt - r0.ru_majflt, thp_kib());
  for (size_t i = 0; i < n; i++) {
    if (recs[i].mapped)
      munmap(recs[i].mem, recs[i].mapped);
    else
      free(recs[i].mem);
  }
  free(recs);
  if (fd >= 0) close(fd);
  if (ck) tstor_checkpoint_free(ck);
  tstor_context_close(ctx);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3 && !(argc == 2 && strcmp(argv[1], "--threads") == 0)) {
    fprintf(stderr,
            "usage: ckpt_bench FILE.pt FILE.safetensors [REPS] [--cold] [--variant N]\n"
            "       ckpt_bench --any FILE [REPS] [--mmap]\n"
            "       ckpt_bench --fresh FILE load|malloc|populate|huge|huge-populate [--cold]\n");
    return 2;
  }
  if (strcmp(argv[1], "--threads") == 0) {
    printf("%d\n", load_threads());
    return 0;
  }
  if (strcmp(argv[1], "--fresh") == 0) {
    if (argc < 4) {
      fprintf(stderr,
              "usage: ckpt_bench --fresh FILE load|malloc|populate|huge|huge-populate [--cold]\n");
      return 2;
    }
    return run_fresh(argv[2], argv[3], argc > 4 && strcmp(argv[4], "--cold") == 0);
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
