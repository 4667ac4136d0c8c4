/* Error codes and the per-thread detail message. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Thread_local char tstor__last_error[TSTOR__ERRBUF];

const char *tstor_strerror(int err) {
  switch (err) {
    case TSTOR_OK: return "success";
#define TSTOR__STR(name, value, msg) \
  case TSTOR_##name: return msg;
    TSTOR_ERRNO_MAP(TSTOR__STR)
#undef TSTOR__STR
  }
  return "unknown error";
}

const char *tstor_err_name(int err) {
  switch (err) {
    case TSTOR_OK: return "TSTOR_OK";
#define TSTOR__NAME(name, value, msg) \
  case TSTOR_##name: return "TSTOR_" #name;
    TSTOR_ERRNO_MAP(TSTOR__NAME)
#undef TSTOR__NAME
  }
  return "TSTOR_EUNKNOWN";
}

const char *tstor_last_error(void) { return tstor__last_error; }

int tstor__verr(int code, const char *fmt, va_list ap) {
  vsnprintf(tstor__last_error, sizeof tstor__last_error, fmt, ap);
  return code;
}

int tstor__err(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tstor__verr(code, fmt, ap);
  va_end(ap);
  return code;
}

size_t tstor__out_struct_size(uint32_t struct_size, size_t first, size_t full, const char *call,
                              const char *type) {
  size_t want = struct_size ? struct_size : first;
  if (want >= first) return want < full ? want : full;
  char init[64];
  size_t i = 0;
  for (; type[i] && i + sizeof "_INIT" < sizeof init; i++)
    init[i] = (char)(type[i] >= 'a' && type[i] <= 'z' ? type[i] - 'a' + 'A' : type[i]);
  memcpy(init + i, "_INIT", sizeof "_INIT");
  tstor__err(TSTOR_EINVAL, "%s: struct_size %u is smaller than any %s (%zu); initialise with %s",
             call, (unsigned)struct_size, type, first, init);
  return 0;
}

/* The detail becomes the formatted prefix, ": ", then what it was. */
static void prefix_detail(const char *fmt, va_list ap) {
  char inner[TSTOR__ERRBUF];
  memcpy(inner, tstor__last_error, sizeof inner);
  int n = vsnprintf(tstor__last_error, sizeof tstor__last_error, fmt, ap);
  if (n >= 0 && (size_t)n < sizeof tstor__last_error)
    snprintf(tstor__last_error + n, sizeof tstor__last_error - (size_t)n, ": %s", inner);
}

void tstor__err_prefix(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  prefix_detail(fmt, ap);
  va_end(ap);
}

int tstor_error_prefix(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  prefix_detail(fmt, ap);
  va_end(ap);
  return code;
}

_Noreturn void tstor__misuse(const char *what, const void *p, const char *why) {
  fprintf(stderr, "tstor: %s %p %s\n", what, p, why);
  abort();
}

/* tstor__err's body again on purpose: the exported entry for libraries built on
 * libtstor (libtstor-io, backends), which may not call core internals, and a
 * variadic function cannot forward its arguments to another. */
int tstor_error_set(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tstor__verr(code, fmt, ap);
  va_end(ap);
  return code;
}
