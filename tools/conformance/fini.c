/* The fini section: what a module leaves behind once its context is closed.
 * fini must give back everything init and the ops took: threads, file
 * descriptors, mappings and heap memory. The process is measured after one
 * round of open, work and close (so that what the first load costs once,
 * such as a driver library that stays loaded, is not counted), then again
 * after more rounds: anything that grows with every round is state leaked
 * at fini. The section runs in its own process, so nothing else moves the
 * figures. */
#include "config.h"

#include <dirent.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

/* AddressSanitizer and ThreadSanitizer map memory of their own as the
 * process frees (ASan's quarantine keeps freed blocks for a while), so under
 * them only threads and descriptors are compared; LeakSanitizer reports heap
 * leaks itself at exit. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MEASURE_MEMORY 0
#else
#define MEASURE_MEMORY 1
#endif

#define ROUNDS 4
/* Heap and mapped bytes wobble a little from round to round (malloc's own
 * bookkeeping, the loader's): growth below these, over all the rounds, is
 * not called a leak. */
#define HEAP_SLACK ((long long)64 << 10)
#define MAP_SLACK ((long long)1 << 20)

typedef struct footprint {
  long long threads, fds, mapped, heap;
} footprint;

static long long count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  long long n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - (strcmp(dir, "/proc/self/fd") == 0); /* the one opendir holds */
}

/* Mapped bytes outside malloc's brk heap: the heap's size follows malloc's
 * fragmentation, not leaks (those show in the bytes in use). */
static long long mapped_bytes(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  long long total = 0;
  unsigned long lo, hi;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && !strstr(line, "[heap]"))
      total += (long long)(hi - lo);
  fclose(f);
  return total;
}

static void measure(footprint *fp) {
  fp->threads = count_entries("/proc/self/task");
  fp->fds = count_entries("/proc/self/fd");
  fp->mapped = mapped_bytes();
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  fp->heap = (long long)mallinfo2().uordblks;
#else
  fp->heap = 0;
#endif
}

/* One round: a context with the module, some of everything on each device
 * (storages, a stream, an event, a copy), then closed. */
static int one_round(conf_run *r, char *why, size_t why_size) {
  tstor_context *ctx = NULL;
  int rc = conf_open_context(r, NULL, 0, &ctx);
  if (rc) {
    snprintf(why, why_size, "opening a context: %s (%s)", tstor_err_name(rc), tstor_last_error());
    return -1;
  }
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  if (conf_find_backend(ctx, r->opt->name, &info) != 0 || info.state != TSTOR_BACKEND_LOADED) {
    snprintf(why, why_size, "the module did not load");
    tstor_context_close(ctx);
    return -1;
  }
  for (int t = 0; t < tstor_device_type_count(ctx); t++) {
    if (!conf_is_target_type(r, ctx, t)) continue;
    tstor_device dev = {t, 0};
    tstor_storage *a = NULL, *b = NULL;
    tstor_stream *s = NULL;
    tstor_event *e = NULL;
    if (tstor_storage_new(ctx, dev, 1 << 20, &a) == 0 &&
        tstor_storage_new(ctx, dev, 1 << 20, &b) == 0 && tstor_stream_new(ctx, dev, &s) == 0 &&
        tstor_event_new(ctx, dev, &e) == 0) {
      tstor_storage_copy_async(b, a, s);
      tstor_event_record(e, s);
      tstor_event_synchronize(e);
    }
    tstor_event_free(e);
    tstor_stream_free(s);
    tstor_storage_release(a);
    tstor_storage_release(b);
  }
  tstor_context_close(ctx);
  return 0;
}

void conf_section_fini(conf_run *r) {
  conf_begin(r, "nothing left after fini", NULL);
  char why[256];
  footprint first, last;
  if (one_round(r, why, sizeof why) != 0) {
    conf_skipf(r, "%s", why);
    goto out;
  }
  measure(&first);
  for (int i = 1; i < ROUNDS; i++)
    if (one_round(r, why, sizeof why) != 0) {
      conf_failf(r, "round %d: %s", i + 1, why);
      goto out;
    }
  measure(&last);
  int more = ROUNDS - 1;
  EXPECT(r, last.threads <= first.threads,
         "%lld threads still running after %d more rounds of init and fini (%lld after the "
         "first): fini must stop and join every thread the module started",
         last.threads - first.threads, more, first.threads);
  EXPECT(r, last.fds <= first.fds,
         "%lld file descriptors left open by %d rounds of init and fini: fini must close them",
         last.fds - first.fds, more);
  if (!MEASURE_MEMORY) {
    conf_notef(r, "%d rounds of init, work and fini: threads and descriptors steady (memory not "
                  "measured under a sanitizer)", ROUNDS);
    goto out;
  }
  EXPECT(r, last.mapped - first.mapped < MAP_SLACK,
         "%lld KiB more mapped after %d rounds of init and fini: fini must unmap what the "
         "module mapped",
         (last.mapped - first.mapped) >> 10, more);
  EXPECT(r, last.heap - first.heap < HEAP_SLACK,
         "%lld KiB more heap in use after %d rounds of init and fini: fini must free what the "
         "module allocated",
         (last.heap - first.heap) >> 10, more);
  conf_notef(r, "%d rounds of init, work and fini: threads, descriptors, mappings, heap steady",
             ROUNDS);
out:
  conf_end(r);
}
