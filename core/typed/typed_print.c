/* Printing storages as PyTorch and Torch7 print them, and formatting one
 * element as Python's str() of PyTorch's item would. */
#include "typed/typed_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- shortest floats */

/* The shortest decimal that reads back as x (finite, > 0), as Python's repr
 * finds it: `digits` gets the significant digits without trailing zeros and
 * *exp10 the power of ten of the first one. printf rounds correctly, so the
 * first precision whose correctly rounded string reads back is the shortest;
 * at a power of two, where the gap below x is half the gap above, a neighbour
 * of that string can read back when it does not, so they are tried too. */
static void shortest_digits(double x, char digits[32], int *exp10) {
  char buf[48], t[48];
  for (int p = 1; p <= 17; p++) {
    snprintf(buf, sizeof buf, "%.*e", p - 1, x);
    char *e = strchr(buf, 'e');
    int scale = atoi(e + 1) - (p - 1); /* buf is m * 10^scale */
    uint64_t m = 0;
    for (const char *c = buf; c < e; c++)
      if (*c != '.') m = m * 10 + (uint64_t)(*c - '0');
    /* m first; then the neighbour on x's side of m, then the other. */
    snprintf(t, sizeof t, "%" PRIu64 "e%d", m, scale);
    double vm = strtod(t, NULL);
    uint64_t cands[3] = {m, vm > x ? m - 1 : m + 1, vm > x ? m + 1 : m - 1};
    for (int k = 0; k < 3; k++) {
      if (cands[k] == 0) continue;
      snprintf(t, sizeof t, "%" PRIu64 "e%d", cands[k], scale);
      if (strtod(t, NULL) != x) continue;
      /* Strip trailing zeros; 999 + 1 has one digit more than p. */
      int n = snprintf(t, sizeof t, "%" PRIu64, cands[k]);
      *exp10 = scale + n - 1;
      while (n > 1 && t[n - 1] == '0') t[--n] = '\0';
      memcpy(digits, t, (size_t)n + 1);
      return;
    }
  }
  /* Not reached: 17 significant digits always read back. */
  snprintf(digits, 32, "%d", 0);
  *exp10 = 0;
}

enum { FMT_ADD_DOT_0 = 1, FMT_SIGN = 2 };

/* Python's repr of a float ('r' format): fixed notation for exponents from -5
 * to 15, scientific otherwise. */
static int format_double(char *out, size_t size, double x, int flags) {
  const char *sign = signbit(x) ? "-" : (flags & FMT_SIGN) ? "+" : "";
  if (isnan(x)) return snprintf(out, size, "%snan", (flags & FMT_SIGN) ? "+" : "");
  if (isinf(x)) return snprintf(out, size, "%sinf", sign);
  if (x == 0) return snprintf(out, size, "%s0%s", sign, (flags & FMT_ADD_DOT_0) ? ".0" : "");
  char d[32];
  int e;
  shortest_digits(fabs(x), d, &e);
  int n = (int)strlen(d);
  char body[64];
  if (e <= -5 || e >= 16) {
    if (n == 1)
      snprintf(body, sizeof body, "%ce%c%02d", d[0], e < 0 ? '-' : '+', abs(e));
    else
      snprintf(body, sizeof body, "%c.%se%c%02d", d[0], d + 1, e < 0 ? '-' : '+', abs(e));
  } else if (e >= 0) {
    char intpart[32], frac[32];
    if (n <= e + 1) {
      memcpy(intpart, d, (size_t)n);
      memset(intpart + n, '0', (size_t)(e + 1 - n));
      intpart[e + 1] = '\0';
      frac[0] = '\0';
    } else {
      memcpy(intpart, d, (size_t)e + 1);
      intpart[e + 1] = '\0';
      snprintf(frac, sizeof frac, "%s", d + e + 1);
    }
    if (frac[0])
      snprintf(body, sizeof body, "%s.%s", intpart, frac);
    else
      snprintf(body, sizeof body, "%s%s", intpart, (flags & FMT_ADD_DOT_0) ? ".0" : "");
  } else {
    snprintf(body, sizeof body, "0.%.*s%s", -e - 1, "0000", d);
  }
  return snprintf(out, size, "%s%s", sign, body);
}

/* --------------------------------------------------------------- elements */

static int format_element(tstor_dtype dtype, const void *value, char *out, size_t size) {
  const tstor_dtype_info *d = tstor_dtype_info_of(dtype);
  tstor_dtype as = d->underlying;
  switch (d->kind == TSTOR_KIND_QUANTIZED ? tstor_dtype_info_of(as)->kind : d->kind) {
    case TSTOR_KIND_BOOL:
      return snprintf(out, size, "%s", *(const unsigned char *)value ? "True" : "False");
    case TSTOR_KIND_UNSIGNED: {
      uint64_t v;
      tstor__convert_serial(&v, TSTOR_UINT64, value, as, 1);
      return snprintf(out, size, "%" PRIu64, v);
    }
    case TSTOR_KIND_SIGNED: {
      int64_t v;
      tstor__convert_serial(&v, TSTOR_INT64, value, as, 1);
      return snprintf(out, size, "%" PRId64, v);
    }
    case TSTOR_KIND_FLOAT: {
      double v;
      tstor__convert_serial(&v, TSTOR_FLOAT64, value, dtype, 1);
      return format_double(out, size, v, FMT_ADD_DOT_0);
    }
    default: { /* complex: as Python's repr of a complex */
      double parts[2];
      tstor__convert_serial(parts, TSTOR_COMPLEX128, value, dtype, 1);
      char re[40], im[40];
      if (parts[0] == 0 && !signbit(parts[0])) {
        format_double(im, sizeof im, parts[1], 0);
        return snprintf(out, size, "%sj", im);
      }
      format_double(re, sizeof re, parts[0], 0);
      format_double(im, sizeof im, parts[1], FMT_SIGN);
      return snprintf(out, size, "(%s%sj)", re, im);
    }
  }
}

int tstor_dtype_format(tstor_dtype dtype, const void *value, char *buf, size_t size,
                       size_t *len) {
  const tstor_dtype_info *d = tstor__dtype(dtype, "dtype_format");
  if (d == NULL) return TSTOR_EINVAL;
  if (value == NULL || buf == NULL) return tstor__err(TSTOR_EINVAL, "dtype_format: NULL argument");
  int rc = tstor__dtype_as_numbers(d, TSTOR__READ_ONE);
  if (rc) return rc;
  char tmp[80];
  int n = format_element(dtype, value, tmp, sizeof tmp);
  if (len) *len = (size_t)n;
  if ((size_t)n >= size) {
    if (size > 0) buf[0] = '\0';
    return tstor__err(TSTOR_ERANGE, "dtype_format: %d characters do not fit in %zu bytes", n,
                      size);
  }
  memcpy(buf, tmp, (size_t)n + 1);
  return 0;
}

/* ---------------------------------------------------------------- storages */

/* "cpu" and "meta" as PyTorch writes them (one device each, no index); other
 * devices as "cuda:1". */
static void device_text(const tstor_storage *s, char *out, size_t size) {
  const tstor__devtype *t = &s->ctx->types[s->device.type];
  if (t->ops.flags & (TSTOR_DEVICE_HOST | TSTOR_DEVICE_NO_DATA) && s->device.index == 0)
    snprintf(out, size, "%s", t->name);
  else
    snprintf(out, size, "%s:%d", t->name, (int)s->device.index);
}

static void footer(FILE *f, const tstor_storage *s, const tstor_dtype_info *d, size_t n,
                   unsigned flags) {
  char dev[96];
  device_text(s, dev, sizeof dev);
  if (flags & TSTOR_PRINT_TORCH7) {
    const char *stem = d->legacy_name ? d->legacy_name : d->scalar_type;
    const tstor__devtype *t = &s->ctx->types[s->device.type];
    if (t->ops.flags & TSTOR_DEVICE_HOST)
      fprintf(f, "[torch.%sStorage of size %zu]\n", stem, n);
    else
      fprintf(f, "[torch.%sStorage of size %zu on %s]\n", stem, n, dev);
  } else if (flags & TSTOR_PRINT_UNTYPED) {
    fprintf(f, "[torch.storage.UntypedStorage(device=%s) of size %zu]\n", dev, n);
  } else {
    fprintf(f, "[torch.storage.TypedStorage(dtype=torch.%s, device=%s) of size %zu]\n", d->name,
            dev, n);
  }
}

/* Formats elements [0, n) chunk by chunk, staging them through host memory,
 * and calls back with each string; stops at the first error. */
typedef void (*element_cb)(void *arg, const char *text, int len);

static int each_element(const tstor_storage *s, const tstor_dtype_info *d, size_t n,
                        element_cb cb, void *arg) {
  enum { CHUNK = 4096 };
  size_t es = d->element_size;
  unsigned char *buf = tstor__malloc(CHUNK * es);
  if (buf == NULL) return tstor__err(TSTOR_ENOMEM, "print: no memory for a staging buffer");
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i += CHUNK) {
    size_t k = n - i < CHUNK ? n - i : CHUNK;
    rc = tstor__typed_read(s, i * es, buf, k * es);
    for (size_t j = 0; j < k && rc == 0; j++) {
      char text[80];
      int len = format_element(d->dtype, buf + j * es, text, sizeof text);
      cb(arg, text, len);
    }
  }
  tstor__free(buf);
  return rc;
}

typedef struct print_state {
  FILE *f;
  int width;
} print_state;

/* ------------------------------------------------------------------ Torch7 */

/* Torch7 prints a storage with one format for all its elements, chosen by
 * Storage__printformat in its Tensor.lua from the elements as Lua numbers
 * (doubles): integers as "%Nd" (N one more than the digits of the largest
 * magnitude) unless that has more than 9 digits; others as "%7.4f" and the
 * like, or "%11.4e" when the magnitudes span more than 4 powers of ten, or
 * with a scale factor printed first ("1e+06 *") when the largest is at least
 * 10^5 or under 0.1. Its min and max of the magnitudes are NaN as soon as one
 * element is NaN, and a NaN width ends in a plain "%f". */
typedef enum { T7_INT, T7_EXP, T7_FIXED, T7_PLAIN } t7_kind;

typedef struct t7_scan {
  int all_integral; /* every value equals its ceil (inf does, NaN does not) */
  int any_nan;
  double min, max; /* of |value| */
  size_t n;
} t7_scan;

static void t7_collect(t7_scan *t, double v) {
  if (v != ceil(v)) t->all_integral = 0;
  double a = fabs(v);
  if (isnan(v)) t->any_nan = 1;
  if (t->n == 0 || a < t->min) t->min = a;
  if (t->n == 0 || a > t->max) t->max = a;
  t->n++;
}

typedef struct t7_format {
  t7_kind kind;
  int width;
  double scale; /* 0: none */
} t7_format;

/* floor(log10(x)) + 1, and 1 for 0, as Tensor.lua computes expMin/expMax,
 * for x >= 0: the decimal exponent printf finds (the core does not link libm;
 * the two can differ only for x within an ulp or so below a power of ten). */
static double t7_exponent(double x) {
  if (x == 0) return 1;
  if (isinf(x)) return x;
  char buf[40];
  snprintf(buf, sizeof buf, "%.17e", x);
  return atoi(strchr(buf, 'e') + 1) + 1;
}

/* 10^k as a double (what pow(10, k) gives), without libm. */
static double t7_power_of_ten(int k) {
  char buf[16];
  snprintf(buf, sizeof buf, "1e%d", k);
  return strtod(buf, NULL);
}

static t7_format t7_choose(const t7_scan *t) {
  double emin = t->any_nan ? NAN : t7_exponent(t->min);
  double emax = t->any_nan ? NAN : t7_exponent(t->max);
  t7_format f = {T7_FIXED, 7, 0};
  if (t->all_integral) {
    if (emax > 9) {
      f.kind = T7_EXP;
      f.width = 11;
    } else {
      f.kind = T7_INT;
      f.width = (int)emax + 1;
    }
  } else if (emax - emin > 4) {
    f.kind = T7_EXP;
    f.width = fabs(emax) > 99 || fabs(emin) > 99 ? 12 : 11;
  } else if (emax > 5 || emax < 0) {
    f.scale = t7_power_of_ten((int)emax - 1);
  } else if (isnan(emax)) {
    f.kind = T7_PLAIN; /* "%nan.4f" becomes "%f" */
  } else {
    f.width = emax == 0 ? 7 : (int)emax + 6;
  }
  return f;
}

/* Reads elements [0, n) as doubles, chunk by chunk through host memory; scans
 * them (f NULL) or prints them in format fmt. */
static int t7_pass(const tstor_storage *s, const tstor_dtype_info *d, size_t n, t7_scan *scan,
                   FILE *f, const t7_format *fmt) {
  enum { CHUNK = 4096 };
  size_t es = d->element_size;
  tstor_dtype from = d->kind == TSTOR_KIND_QUANTIZED ? d->underlying : d->dtype;
  unsigned char *buf = tstor__malloc(CHUNK * es);
  double *v = tstor__malloc(CHUNK * sizeof *v);
  int rc = buf && v ? 0 : tstor__err(TSTOR_ENOMEM, "print: no memory for a staging buffer");
  for (size_t i = 0; i < n && rc == 0; i += CHUNK) {
    size_t k = n - i < CHUNK ? n - i : CHUNK;
    if ((rc = tstor__typed_read(s, i * es, buf, k * es))) break;
    tstor__convert_serial(v, TSTOR_FLOAT64, buf, from, k);
    for (size_t j = 0; j < k; j++) {
      if (!f) {
        t7_collect(scan, v[j]);
        continue;
      }
      double x = fmt->scale ? v[j] / fmt->scale : v[j];
      switch (fmt->kind) {
        case T7_INT: /* Lua's %d of an integral number */
          fprintf(f, "%*lld\n", fmt->width, (long long)x);
          break;
        case T7_EXP:
          fprintf(f, "%*.4e\n", fmt->width, x);
          break;
        case T7_FIXED:
          fprintf(f, "%*.4f\n", fmt->width, x);
          break;
        case T7_PLAIN:
          fprintf(f, "%f\n", x);
          break;
      }
    }
  }
  tstor__free(buf);
  tstor__free(v);
  return rc;
}

static int print_torch7(FILE *f, const tstor_storage *s, const tstor_dtype_info *d, size_t n) {
  t7_scan scan = {1, 0, 0, 0, 0};
  int rc = t7_pass(s, d, n, &scan, NULL, NULL);
  if (rc) return rc;
  t7_format fmt = t7_choose(&scan);
  if (fmt.scale != 0 && fmt.scale != 1) fprintf(f, "%g *\n", fmt.scale);
  else fmt.scale = 0;
  return t7_pass(s, d, n, NULL, f, &fmt);
}

static void widest(void *arg, const char *text, int len) {
  print_state *p = arg;
  (void)text;
  if (len > p->width) p->width = len;
}

static void print_line(void *arg, const char *text, int len) {
  print_state *p = arg;
  (void)len;
  fprintf(p->f, " %*s\n", p->width, text);
}

int tstor_typed_print(FILE *f, const tstor_storage *s, tstor_dtype dtype, unsigned flags) {
  if (f == NULL || s == NULL) return tstor__err(TSTOR_EINVAL, "typed_print: NULL argument");
  if (flags & ~(unsigned)(TSTOR_PRINT_TORCH7 | TSTOR_PRINT_UNTYPED))
    return tstor__err(TSTOR_EINVAL, "typed_print: unknown flags 0x%x", flags);
  if ((flags & TSTOR_PRINT_UNTYPED) && (dtype != TSTOR_UINT8 || (flags & TSTOR_PRINT_TORCH7)))
    return tstor__err(TSTOR_EINVAL, "typed_print: an untyped storage prints as uint8 bytes, in PyTorch's form");
  size_t n;
  int rc = tstor_typed_size(s, dtype, &n);
  if (rc) return rc;
  const tstor_dtype_info *d = tstor_dtype_info_of(dtype);
  const tstor__devtype *t = &s->ctx->types[s->device.type];
  /* PyTorch's TypedStorage asks iinfo about a bits dtype before anything */
  if (d->kind == TSTOR_KIND_OPAQUE && !tstor__opaque_float(dtype))
    return tstor__err(TSTOR_EDTYPE,
                      "torch.iinfo() requires an integer input type. Use "
                      "torch.finfo to handle 'torch.iinfo'");
  if ((s->flags & TSTOR_FLAG_NO_DATA) || (t->ops.flags & TSTOR_DEVICE_NO_DATA)) {
    fputs("...\n", f); /* PyTorch's placeholder for elements a meta storage lacks */
  } else if (n > 0 && (rc = tstor__dtype_as_numbers(d, TSTOR__READ_ONE))) {
    return rc; /* nothing written: PyTorch reads the first element before it prints */
  } else if ((flags & TSTOR_PRINT_TORCH7) && d->kind != TSTOR_KIND_COMPLEX) {
    if ((rc = print_torch7(f, s, d, n))) return rc; /* nothing before the footer when empty */
  } else if (n == 0) {
    fputs(" \n", f);
  } else {
    /* Complex in Torch7's style (it had none): Python's reprs, right-aligned. */
    print_state p = {f, 0};
    if ((flags & TSTOR_PRINT_TORCH7) && (rc = each_element(s, d, n, widest, &p))) return rc;
    if ((rc = each_element(s, d, n, print_line, &p))) return rc;
  }
  footer(f, s, d, n, flags);
  if (ferror(f)) return tstor__err(TSTOR_EIO, "typed_print: write error");
  return 0;
}
