/* bench_mapped: what mapping a file costs against reading it.
 *
 *   1. Mapping a file is O(1): tstor_storage_from_file + release on a 1 GiB
 *      file, against reading the same file into a new storage
 *      (tstor_storage_new + read()).
 *   2. First-touch read throughput: summing every byte of a fresh mapping
 *      (each page is faulted in on first touch), against read() in 1 MiB
 *      chunks into one buffer, summed as it comes, and against read() of the
 *      whole file into a new storage, then summed.
 *
 * Both with the file in the page cache (warm) and, with --cold, evicted
 * before each round (posix_fadvise DONTNEED on this file only: nothing else
 * on the machine is dropped). Rounds alternate the contenders and the best
 * round of each is kept. Prints a table for docs/benchmarks.md.
 *
 * usage: bench_mapped [--size MIB] [--rounds N] [--dir DIR] [--cold] [--quick]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <tstor/mapped.h>
#include <tstor/tstor.h>

#define CHUNK ((size_t)1 << 20)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
  fprintf(stderr, "bench_mapped: %s: %s\n", what, errno ? strerror(errno) : tstor_last_error());
  exit(1);
}

static volatile uint64_t sink;

static uint64_t sum(const void *p, size_t n) {
  const uint64_t *w = p;
  uint64_t s = 0;
  for (size_t i = 0; i < n / 8; i++) s += w[i];
  return s;
}

typedef struct bench {
  tstor_context *ctx;
  tstor_device cpu;
  const char *path;
  size_t size;
  int cold;
  unsigned char *chunk; /* CHUNK bytes for the read() loop */
} bench;

/* Drops the file's pages from the page cache (they are clean: fsynced). */
static void evict(const bench *b) {
  if (!b->cold) return;
  int fd = open(b->path, O_RDONLY);
  if (fd < 0) die("open");
  if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) die("posix_fadvise");
  close(fd);
}

static void read_all(int fd, unsigned char *dst, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, dst + got, n - got < CHUNK * 64 ? n - got : CHUNK * 64);
    if (r <= 0) die("read");
    got += (size_t)r;
  }
}

/* --- 1. open: mapping against reading, seconds per call */

static double map_release(const bench *b, unsigned flags, int iters) {
  double t = now();
  for (int i = 0; i < iters; i++) {
    tstor_storage *s;
    if (tstor_storage_from_file(b->ctx, b->path, flags, 0, 1, &s) != 0) die("from_file");
    tstor_storage_release(s);
  }
  return (now() - t) / iters;
}

static double read_into_storage(const bench *b) {
  evict(b);
  double t = now();
  tstor_storage *s;
  if (tstor_storage_new(b->ctx, b->cpu, b->size, &s) != 0) die("storage_new");
  int fd = open(b->path, O_RDONLY);
  if (fd < 0) die("open");
  read_all(fd, tstor_storage_data(s), b->size);
  close(fd);
  tstor_storage_release(s);
  return now() - t;
}

/* --- 2. first touch: seconds to have summed every byte */

static double touch_mapping(const bench *b) {
  evict(b);
  double t = now();
  tstor_storage *s;
  if (tstor_storage_from_file(b->ctx, b->path, 0, 0, 1, &s) != 0) die("from_file");
  sink = sum(tstor_storage_data(s), tstor_storage_nbytes(s));
  tstor_storage_release(s);
  return now() - t;
}

static double read_chunks(const bench *b) {
  evict(b);
  double t = now();
  int fd = open(b->path, O_RDONLY);
  if (fd < 0) die("open");
  uint64_t total = 0;
  for (size_t done = 0; done < b->size; done += CHUNK) {
    read_all(fd, b->chunk, CHUNK);
    total += sum(b->chunk, CHUNK);
  }
  close(fd);
  sink = total;
  return now() - t;
}

static double read_storage_then_sum(const bench *b) {
  evict(b);
  double t = now();
  tstor_storage *s;
  if (tstor_storage_new(b->ctx, b->cpu, b->size, &s) != 0) die("storage_new");
  int fd = open(b->path, O_RDONLY);
  if (fd < 0) die("open");
  read_all(fd, tstor_storage_data(s), b->size);
  close(fd);
  sink = sum(tstor_storage_data(s), b->size);
  tstor_storage_release(s);
  return now() - t;
}

static void make_file(const bench *b) {
  int fd = open(b->path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) die("create");
  for (size_t i = 0; i < CHUNK; i++) b->chunk[i] = (unsigned char)(i * 131 + 7);
  for (size_t done = 0; done < b->size; done += CHUNK)
    if (write(fd, b->chunk, CHUNK) != (ssize_t)CHUNK) die("write");
  if (fsync(fd) != 0) die("fsync");
  close(fd);
}

static const char *fs_name(const char *path) {
  struct statfs f;
  if (statfs(path, &f) != 0) return "?";
  switch ((unsigned long)f.f_type) {
    case 0xEF53:
      return "ext4";
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0x01021994:
      return "tmpfs";
    case 0x794c7630:
      return "overlayfs";
    default:
      return "other";
  }
}

static void machine(const bench *b) {
  char model[256] = "?";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f))
      if (strncmp(line, "model name", 10) == 0) {
        char *c = strchr(line, ':');
        if (c) snprintf(model, sizeof model, "%s", c + 2);
        model[strcspn(model, "\n")] = '\0';
        break;
      }
    fclose(f);
  }
  struct utsname u;
  uname(&u);
  time_t t = time(NULL);
  char date[32];
  strftime(date, sizeof date, "%Y-%m-%d", gmtime(&t));
  printf("machine: %s, %ld cpus, Linux %s; file on %s; %s\n", model, sysconf(_SC_NPROCESSORS_ONLN),
         u.release, fs_name(b->path), date);
}

int main(int argc, char **argv) {
  size_t mib = 1024;
  int rounds = 5, cold = 0;
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
      mib = (size_t)strtoul(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      dir = argv[++i];
    } else if (strcmp(argv[i], "--cold") == 0) {
      cold = 1;
    } else if (strcmp(argv[i], "--quick") == 0) {
      mib = 64;
      rounds = 2;
    } else {
      fprintf(stderr,
              "usage: bench_mapped [--size MIB] [--rounds N] [--dir DIR] [--cold] [--quick]\n");
      return 2;
    }
  }
  if (mib == 0 || rounds < 1) {
    fprintf(stderr, "bench_mapped: --size and --rounds must be at least 1\n");
    return 2;
  }

  bench b;
  memset(&b, 0, sizeof b);
  b.size = mib * CHUNK;
  b.cold = cold;
  char path[512];
  snprintf(path, sizeof path, "%s/tstor-bench-mapped-%ld.bin", dir, (long)getpid());
  b.path = path;
  b.chunk = aligned_alloc(64, CHUNK);
  if (!b.chunk) die("aligned_alloc");
  if (tstor_context_open(NULL, &b.ctx) != 0) die("context_open");
  if (tstor_device_parse(b.ctx, "cpu", &b.cpu) != 0) die("device cpu");
  make_file(&b);
  machine(&b);
  printf("file: %zu MiB, page cache %s, best of %d rounds\n\n", mib,
         cold ? "dropped before each round (cold)" : "holding the file (warm)", rounds);

  double map_priv = 1e30, map_shared = 1e30, read_new = 1e30;
  double touch = 1e30, chunks = 1e30, whole = 1e30;
  for (int r = 0; r < rounds; r++) {
    double x;
    if ((x = map_release(&b, 0, 200)) < map_priv) map_priv = x;
    if ((x = map_release(&b, TSTOR_FILE_SHARED, 200)) < map_shared) map_shared = x;
    if ((x = read_into_storage(&b)) < read_new) read_new = x;
    if ((x = touch_mapping(&b)) < touch) touch = x;
    if ((x = read_chunks(&b)) < chunks) chunks = x;
    if ((x = read_storage_then_sum(&b)) < whole) whole = x;
  }
  unlink(path);

  double gib = (double)b.size / (double)(1u << 30);
  printf("| operation (%zu MiB file) | time | vs reading it into a new storage |\n", mib);
  printf("| --- | ---: | ---: |\n");
  printf("| `from_file` private + release | %.1f us | %.0fx faster |\n", map_priv * 1e6,
         read_new / map_priv);
  printf("| `from_file` shared + release | %.1f us | %.0fx faster |\n", map_shared * 1e6,
         read_new / map_shared);
  printf("| `storage_new` + `read()` of the whole file + release | %.1f ms | 1x |\n\n",
         read_new * 1e3);
  printf("| first touch: every byte summed once | time | throughput |\n");
  printf("| --- | ---: | ---: |\n");
  printf("| mapped (`from_file` private), summed in place | %.1f ms | %.2f GiB/s |\n", touch * 1e3,
         gib / touch);
  printf("| `read()` in 1 MiB chunks into one buffer, summed | %.1f ms | %.2f GiB/s |\n",
         chunks * 1e3, gib / chunks);
  printf("| `read()` into a new storage, then summed | %.1f ms | %.2f GiB/s |\n", whole * 1e3,
         gib / whole);
  free(b.chunk);
  tstor_context_close(b.ctx);
  return 0;
}
