/* What the sections of `tstor conformance` share (common.c): reporting a
 * check's result, test patterns, host round trips and each section's setup
 * and teardown. Every section file includes this and the checks use the
 * public API only, exactly as an application would: what they find is what
 * applications will meet.
 *
 * A check runs between conf_begin and conf_end; its first failure is its
 * reason (later ones are dropped), a skip never hides a failure, and a note
 * is a remark on a check that passed. TRY and EXPECT jump to the check's
 * `out:` label, where it releases what it holds. The `out:` blocks and the
 * conf_section_* device loops of alloc.c, args.c, async.c, copy.c, fill.c,
 * stats.c and threads.c look alike but stay apart: each check owns different
 * objects, and a shared helper would need them all as parameters. */
#ifndef TSTOR_CONFORMANCE_CHECKS_H
#define TSTOR_CONFORMANCE_CHECKS_H

#include <stddef.h>

#include "../conformance.h"

#define CONF_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* ------------------------------------------------------------- reporting */

void conf_begin(conf_run *r, const char *check, const char *device);
void conf_end(conf_run *r);
void conf_failf(conf_run *r, const char *fmt, ...) CONF_PRINTF(2, 3);
/* "what: TSTOR_ENOMEM (detail)", the detail from tstor_last_error(). */
void conf_fail_rc(conf_run *r, int rc, const char *fmt, ...) CONF_PRINTF(3, 4);
void conf_skipf(conf_run *r, const char *fmt, ...) CONF_PRINTF(2, 3);
void conf_notef(conf_run *r, const char *fmt, ...) CONF_PRINTF(2, 3);

#define TRY(r, expr, ...)                      \
  do {                                         \
    int try_rc_ = (expr);                      \
    if (try_rc_ != 0) {                        \
      conf_fail_rc((r), try_rc_, __VA_ARGS__); \
      goto out;                                \
    }                                          \
  } while (0)

#define EXPECT(r, cond, ...)        \
  do {                              \
    if (!(cond)) {                  \
      conf_failf((r), __VA_ARGS__); \
      goto out;                     \
    }                               \
  } while (0)

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
/* Bytes checked on each side of a write, a copy or a fill. */
#define GUARD 64

/* --------------------------------------------------------------- helpers */

/* Bytes that differ with position and seed, so that a shifted, truncated or
 * stale copy never matches by accident. */
void conf_pattern(unsigned char *p, size_t n, unsigned seed);
/* Index of the first byte where a and b differ, or SIZE_MAX. */
size_t conf_mismatch(const unsigned char *a, const unsigned char *b, size_t n);
/* malloc, or exit with a message. */
void *conf_xmalloc(size_t n);
/* Copies tstor_storage_nbytes(dst) bytes from host memory into dst, or all of
 * src out into host memory, through storages wrapping the host buffer. */
int conf_upload(conf_run *r, tstor_storage *dst, const void *buf);
int conf_download(conf_run *r, void *buf, const tstor_storage *src);
/* A host buffer as a storage of the context's host device; a new reference. */
int conf_host_storage(conf_run *r, void *buf, size_t n, tstor_storage **out);
/* The device's statistics, zeroed first. */
int conf_read_stats(conf_run *r, const conf_device *d, tstor_stats *s);
/* "direct", "host", "staged", "sizes only", "impossible". */
const char *conf_path_name(int path);
/* The backend named `name` in ctx; -1 when there is none. */
int conf_find_backend(tstor_context *ctx, const char *name, tstor_backend_info *out);
/* Whether a device type is one the module under test registered. */
int conf_is_target_type(conf_run *r, tstor_context *ctx, int type);
/* A new context with the module under test and `extra` keys for its section. */
int conf_open_context(conf_run *r, const char *const *extra, int nextra, tstor_context **out);

/* Whether `msg` is empty, or one the core writes in place of a message when
 * a backend failed or declined without one ("declined", "hpu allocator
 * failed for 64 bytes"): a user then learns nothing from the backend. */
int conf_no_own_message(const char *msg);
/* After a call refused as expected: fails the check when tstor_last_error()
 * is empty and, with --strict, when it is only the core's stand-in. */
void conf_check_message(conf_run *r, const char *what);

/* Opens the section's context (r->ctx) and lists the devices under test;
 * reports a "setup" row and returns -1 when there is nothing to test. */
int conf_setup(conf_run *r);
/* Every section that called conf_setup ends here: each device's allocated is
 * checked against the start, and the context is closed. */
void conf_teardown(conf_run *r);

#endif
