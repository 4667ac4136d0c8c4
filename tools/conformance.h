/* tstor conformance: shared between the driver (conformance.c: options, one
 * child process per section, the table) and the sections (conformance/NAME.c,
 * one file each, with what they share in conformance/checks.h). */
#ifndef TSTOR_CONFORMANCE_H
#define TSTOR_CONFORMANCE_H

#include <stddef.h>

#include <tstor/tstor.h>

#define CONF_MAX_KEYS 32
#define CONF_MAX_DEVICES 64
#define CONF_REASON 512

typedef enum { CONF_PASS = 0, CONF_FAIL = 1, CONF_SKIP = 2 } conf_status;

/* What the command line asked for; read-only once the checks start. */
typedef struct conf_options {
  const char *library;    /* absolute path of the module under test */
  const char *name;       /* its [backend NAME] section */
  const char *keys[CONF_MAX_KEYS]; /* --set KEY=VALUE, copied into its section */
  int nkeys;
  const char *no_hw_keys[CONF_MAX_KEYS]; /* --no-hardware KEY=VALUE */
  int nno_hw_keys;
  int add_cpu;            /* 0 when the module under test is the cpu backend itself */
  size_t large_bytes;     /* the "large" allocation */
  size_t min_align;       /* required alignment of device addresses */
  int threads;
  int strict;             /* --strict: skips fail; counters, peaks and messages required */
} conf_options;

/* One device under test. */
typedef struct conf_device {
  tstor_device dev;
  char label[64];  /* "hpu:0" */
  int count;       /* devices of its type */
  int has_data;    /* 0 for sizes-only devices (meta) */
  int first;       /* index 0 of its type: checks that need one device per type */
  int stats_ok;    /* stats could be read when the section began */
  unsigned long long start_allocated; /* ... and said this */
} conf_device;

/* The state of one section's run. */
typedef struct conf_run {
  const conf_options *opt;
  const char *section;
  tstor_context *ctx;
  tstor_device host;
  conf_device devs[CONF_MAX_DEVICES];
  int ndevs;
  /* Where results go: a pipe to the parent, or -1 for the in-process list. */
  int fd;
  /* The check in progress. */
  const char *check;
  const char *device;
  conf_status status;
  char reason[CONF_REASON];
} conf_run;

/* The sections, in the order they run: one file each under conformance/,
 * which defines conf_section_NAME. The one list of them; the table, the
 * usage text and --section all come from it. */
#define CONF_SECTION_MAP(X)                                                          \
  X(load, "loads, names its devices, copy paths, init/fini again")                   \
  X(decline, "declines without hardware, leaving nothing behind")                    \
  X(alloc, "0 bytes, small, large and impossible sizes, reuse, alignment, resize")   \
  X(copy, "host round trips at many sizes and offsets, device to device, batches")   \
  X(fill, "byte and pattern fills through views; bad patterns refused")              \
  X(async, "streams, events, ordering, record_stream")                               \
  X(stats, "allocated back to zero, counts, peaks")                                  \
  X(properties, "free within total, lowered by allocations; alignment; a stable id") \
  X(threads, "concurrent allocation, copies and streams")                            \
  X(args, "bad devices, sizes and views refused, nothing changed")                   \
  X(fini, "threads, descriptors, mappings and heap all given back at fini")

#define CONF_DECLARE_SECTION(name, summary) void conf_section_##name(conf_run *r);
CONF_SECTION_MAP(CONF_DECLARE_SECTION)
#undef CONF_DECLARE_SECTION

typedef struct conf_section {
  const char *name;
  const char *summary;
  void (*run)(conf_run *r);
} conf_section;
extern const conf_section conf_sections[];
extern const int conf_nsections;

/* Builds the INI text for a context: the cpu backend when needed, and the
 * module under test with its keys plus `extra` (NULL-terminated or NULL).
 * Returns a malloc'd string. */
char *conf_config_text(const conf_options *opt, const char *const *extra, int nextra);

/* Reports one result (check, device, status, reason) to wherever results go. */
void conf_emit(conf_run *r, const char *check, const char *device, conf_status status,
               const char *reason);
/* Tells the parent which check is running, so a crash can be pinned on it. */
void conf_emit_begin(conf_run *r, const char *check, const char *device);

#endif
