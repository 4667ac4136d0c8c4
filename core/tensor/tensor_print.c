/* Printing tensors exactly as PyTorch 1.13's str(tensor) does
 * (torch/_tensor_str.py), and torch 2.x for the dtypes 1.13 lacks: one
 * formatter per tensor (per part, for complex) chosen from the values shown
 * (fixed, integer-valued or scientific, and the widest entry), rows wrapped
 * at 80 columns, more than 1000 elements summarised with the first and last
 * 3 entries of every dimension around "...", and the device, dtype and size
 * suffixes PyTorch adds. */
#include "tensor/tensor_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PRECISION 4
#define THRESHOLD 1000
#define EDGEITEMS 3
#define LINEWIDTH 80

/* ------------------------------------------------------------- strings */

typedef struct sbuf {
  char *p;
  size_t len, cap;
  int failed;
} sbuf;

static void sb_addn(sbuf *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *q = tstor__realloc(b->p, cap);
    if (q == NULL) {
      b->failed = 1;
      return;
    }
    b->p = q;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}
static void sb_add(sbuf *b, const char *s) { sb_addn(b, s, strlen(s)); }
static void sb_spaces(sbuf *b, int n) {
  for (int i = 0; i < n; i++) sb_addn(b, " ", 1);
}

/* ----------------------------------------------------------- formatters */

enum { K_BOOL, K_INT, K_UINT, K_FLOAT, K_COMPLEX };

typedef struct formatter {
  int floating, int_mode, sci_mode, max_width;
} formatter;

/* Python's "{:.Nf}" / "{:.Ne}" / "{:.0f}" of a double (C's printf rounds the
 * same way; Python writes every NaN as "nan"). */
static int fmt_fixed(char *out, size_t size, double v, int prec) {
  if (isnan(v)) return snprintf(out, size, "nan");
  return snprintf(out, size, "%.*f", prec, v);
}
static int fmt_sci(char *out, size_t size, double v) {
  if (isnan(v)) return snprintf(out, size, "nan");
  return snprintf(out, size, "%.*e", PRECISION, v);
}

/* An integer entry as Python's str() of it. */
static int fmt_int(char *out, size_t size, int kind, int64_t iv) {
  if (kind == K_BOOL) return snprintf(out, size, "%s", iv ? "True" : "False");
  if (kind == K_UINT) return snprintf(out, size, "%" PRIu64, (uint64_t)iv);
  return snprintf(out, size, "%" PRId64, iv);
}

/* `zero` is 0 as the dtype holds it (2^-127 in float8_e8m0fnu, which has no
 * zero): the values PyTorch's ne(0) counts as zeros. */
static void formatter_init(formatter *f, int kind, const double *v, const int64_t *iv, size_t n,
                           double zero) {
  f->floating = kind == K_FLOAT;
  f->int_mode = 1;
  f->sci_mode = 0;
  f->max_width = 1;
  char buf[64];
  if (!f->floating) {
    for (size_t i = 0; i < n; i++) {
      int len = fmt_int(buf, sizeof buf, kind, iv[i]);
      if (len > f->max_width) f->max_width = len;
    }
    return;
  }
  double mn = INFINITY, mx = 0;
  size_t count = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(v[i]) || v[i] == 0 || v[i] == zero) continue;
    double a = fabs(v[i]);
    if (a < mn) mn = a;
    if (a > mx) mx = a;
    if (v[i] != ceil(v[i])) f->int_mode = 0;
    count++;
  }
  if (count == 0) return;
  if (f->int_mode)
    f->sci_mode = mx / mn > 1000.0 || mx > 1.0e8;
  else
    f->sci_mode = mx / mn > 1000.0 || mx > 1.0e8 || mn < 1.0e-4;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(v[i]) || v[i] == 0 || v[i] == zero) continue;
    int len;
    if (f->sci_mode)
      len = fmt_sci(buf, sizeof buf, v[i]);
    else if (f->int_mode)
      len = fmt_fixed(buf, sizeof buf, v[i], 0) + 1;
    else
      len = fmt_fixed(buf, sizeof buf, v[i], PRECISION);
    if (len > f->max_width) f->max_width = len;
  }
}

/* _Formatter.format: the entry right-aligned to max_width. */
static void formatter_format(const formatter *f, int kind, double v, int64_t iv, char *out,
                             size_t size) {
  char buf[64];
  int len;
  if (f->floating) {
    if (f->sci_mode) {
      len = fmt_sci(buf, sizeof buf, v);
    } else if (f->int_mode) {
      len = fmt_fixed(buf, sizeof buf, v, 0);
      if (isfinite(v)) buf[len++] = '.', buf[len] = '\0';
    } else {
      len = fmt_fixed(buf, sizeof buf, v, PRECISION);
    }
  } else {
    len = fmt_int(buf, sizeof buf, kind, iv);
  }
  int pad = f->max_width > len ? f->max_width - len : 0;
  snprintf(out, size, "%*s%s", pad, "", buf);
}

/* --------------------------------------------------------------- values */

/* The entries shown, in printing order, read from a host tensor. */
typedef struct shown {
  const tstor_tensor *t;
  tstor_dtype read_as; /* the dtype its entries are read as */
  int kind, summarize;
  double *re, *im;
  int64_t *iv;
  size_t n, cap;
  int failed;
} shown;

static void gather(shown *s, int dim, const char *p) {
  const tstor_tensor *t = s->t;
  if (dim == t->ndim) {
    if (s->n == s->cap) {
      size_t cap = s->cap ? s->cap * 2 : 64;
      double *re = tstor__realloc(s->re, cap * sizeof(double));
      if (re) s->re = re;
      double *im = tstor__realloc(s->im, cap * sizeof(double));
      if (im) s->im = im;
      int64_t *iv = tstor__realloc(s->iv, cap * sizeof(int64_t));
      if (iv) s->iv = iv;
      if (!re || !im || !iv) {
        s->failed = 1;
        return;
      }
      s->cap = cap;
    }
    double c[2] = {0, 0};
    int64_t i = 0;
    if (s->kind == K_COMPLEX)
      tstor__convert_serial(c, TSTOR_COMPLEX128, p, s->read_as, 1);
    else if (s->kind == K_FLOAT)
      tstor__convert_serial(c, TSTOR_FLOAT64, p, s->read_as, 1);
    else /* uint64 past INT64_MAX too: its bits */
      tstor__convert_serial(&i, TSTOR_INT64, p, s->read_as, 1);
    s->re[s->n] = c[0];
    s->im[s->n] = c[1];
    s->iv[s->n] = i;
    s->n++;
    return;
  }
  int64_t size = t->sizes[dim], step = t->strides[dim] * (int64_t)t->esize;
  for (int64_t k = 0; k < size && !s->failed; k++) {
    if (s->summarize && size > 2 * EDGEITEMS && k == EDGEITEMS) k = size - EDGEITEMS;
    gather(s, dim + 1, p + k * step);
  }
}

/* ------------------------------------------------------------- layout */

typedef struct printer {
  shown *s;
  formatter f1, f2;
  size_t next; /* entry to print next */
  sbuf *out;
} printer;

static void entry(printer *pr, char *buf, size_t size) {
  size_t i = pr->next++;
  const shown *s = pr->s;
  if (s->kind != K_COMPLEX) {
    formatter_format(&pr->f1, s->kind, s->re[i], s->iv[i], buf, size);
    return;
  }
  char re[80], im[80];
  formatter_format(&pr->f1, K_FLOAT, s->re[i], 0, re, sizeof re);
  formatter_format(&pr->f2, K_FLOAT, s->im[i], 0, im, sizeof im);
  const char *ims = im;
  while (*ims == ' ') ims++; /* lstrip */
  snprintf(buf, size, "%s%s%sj", re, (*ims == '+' || *ims == '-') ? "" : "+", ims);
}

static void vector_str(printer *pr, int64_t size, int indent) {
  int element_length = pr->f1.max_width + 2;
  if (pr->s->kind == K_COMPLEX) element_length += pr->f2.max_width + 1;
  int per_line = (LINEWIDTH - indent) / element_length;
  if (per_line < 1) per_line = 1;
  int64_t count = size;
  int summarized = pr->s->summarize && size > 2 * EDGEITEMS;
  if (summarized) count = 2 * EDGEITEMS + 1;
  sb_add(pr->out, "[");
  char buf[200];
  for (int64_t k = 0; k < count; k++) {
    if (k > 0) {
      if (k % per_line == 0) {
        sb_add(pr->out, ",\n");
        sb_spaces(pr->out, indent + 1);
      } else {
        sb_add(pr->out, ", ");
      }
    }
    if (summarized && k == EDGEITEMS)
      sb_add(pr->out, " ...");
    else {
      entry(pr, buf, sizeof buf);
      sb_add(pr->out, buf);
    }
  }
  sb_add(pr->out, "]");
}

static void tensor_str(printer *pr, int dim, int indent) {
  const tstor_tensor *t = pr->s->t;
  int left = t->ndim - dim;
  if (left == 0) {
    char buf[200];
    entry(pr, buf, sizeof buf);
    sb_add(pr->out, buf);
    return;
  }
  if (left == 1) {
    vector_str(pr, t->sizes[dim], indent);
    return;
  }
  int64_t size = t->sizes[dim];
  int summarized = pr->s->summarize && size > 2 * EDGEITEMS;
  int64_t count = summarized ? 2 * EDGEITEMS + 1 : size;
  sb_add(pr->out, "[");
  for (int64_t k = 0; k < count; k++) {
    if (k > 0) {
      sb_add(pr->out, ",");
      for (int i = 0; i < left - 1; i++) sb_add(pr->out, "\n");
      sb_spaces(pr->out, indent + 1);
    }
    if (summarized && k == EDGEITEMS)
      sb_add(pr->out, "...");
    else
      tensor_str(pr, dim + 1, indent + 1);
  }
  sb_add(pr->out, "]");
}

/* --------------------------------------------------------------- suffixes */

static void add_suffixes(sbuf *b, char suffixes[][160], int n, int indent) {
  const char *nl = b->p ? strrchr(b->p, '\n') : NULL;
  /* PyTorch's count: len - rfind("\n") + 1, also without a newline */
  size_t last_line_len = b->len - (nl ? (size_t)(nl - b->p) : (size_t)-1) + 1;
  for (int i = 0; i < n; i++) {
    size_t len = strlen(suffixes[i]);
    if (last_line_len + len + 2 > LINEWIDTH) {
      sb_add(b, ",\n");
      sb_spaces(b, indent);
      last_line_len = (size_t)indent + len;
    } else {
      sb_add(b, ", ");
      last_line_len += len + 2;
    }
    sb_add(b, suffixes[i]);
  }
  sb_add(b, ")");
}

static void size_suffix(const tstor_tensor *t, char *out, size_t size) {
  size_t k = (size_t)snprintf(out, size, "size=(");
  for (int i = 0; i < t->ndim && k < size; i++)
    k += (size_t)snprintf(out + k, size - k, "%s%" PRId64, i ? ", " : "", t->sizes[i]);
  if (k < size) snprintf(out + k, size - k, "%s)", t->ndim == 1 ? "," : "");
}

/* The elements of a tensor with data, as a host tensor. */
static int host_copy(const tstor_tensor *t, tstor_tensor **out) {
  if (tstor__tensor_on_host(t)) {
    *out = tstor_tensor_retain((tstor_tensor *)t);
    return 0;
  }
  tstor_context *ctx = t->storage->ctx;
  if (ctx->host_type < 0) return tstor__err(TSTOR_ENOTSUP, "no host device to print through");
  tstor_device h = {ctx->host_type, 0};
  return tstor_tensor_to(t, h, t->dtype, out);
}

/* The values of t, which has data and elements, nested in brackets as
 * PyTorch prints them; failures to allocate mark b as failed. */
static int print_values(const tstor_tensor *t, sbuf *b, int indent) {
  const tstor_dtype_info *d = tstor_dtype_info_of(t->dtype);
  /* PyTorch reads no item() of an opaque dtype: a 0-dim tensor of one is
   * refused, and so is every bits tensor with elements; float4_e2m1fn_x2
   * shows the uint8 view of its bytes, in a float's format. */
  int rc = t->ndim == 0 || !tstor__opaque_float(t->dtype)
               ? tstor__dtype_as_numbers(d, TSTOR__READ_ONE)
               : 0;
  tstor_tensor *h;
  if (rc || (rc = host_copy(t, &h))) return rc;
  shown s = {0};
  s.t = h;
  s.read_as = d->kind == TSTOR_KIND_OPAQUE ? TSTOR_UINT8 : d->underlying;
  s.kind = d->kind == TSTOR_KIND_BOOL                                    ? K_BOOL
           : d->kind == TSTOR_KIND_FLOAT || d->kind == TSTOR_KIND_OPAQUE ? K_FLOAT
           : d->kind == TSTOR_KIND_COMPLEX                               ? K_COMPLEX
           : d->kind == TSTOR_KIND_UNSIGNED                              ? K_UINT
                                                                         : K_INT;
  s.summarize = t->numel > THRESHOLD;
  gather(&s, 0, tstor_tensor_data(h));
  if (!s.failed) {
    printer pr = {&s, {0}, {0}, 0, b};
    double zero[2] = {0, 0};
    unsigned char elem[16];
    tstor__convert_serial(elem, s.read_as, zero, TSTOR_FLOAT64, 1);
    tstor__convert_serial(zero, TSTOR_FLOAT64, elem, s.read_as, 1);
    if (s.kind == K_COMPLEX) {
      formatter_init(&pr.f1, K_FLOAT, s.re, NULL, s.n, 0);
      formatter_init(&pr.f2, K_FLOAT, s.im, NULL, s.n, 0);
    } else {
      formatter_init(&pr.f1, s.kind, s.re, s.iv, s.n, s.kind == K_FLOAT ? zero[0] : 0);
    }
    tensor_str(&pr, 0, indent);
  }
  tstor__free(s.re);
  tstor__free(s.im);
  tstor__free(s.iv);
  tstor_tensor_release(h);
  if (s.failed) b->failed = 1;
  return 0;
}

int tstor_tensor_to_string(const tstor_tensor *t, char **out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_to_string: NULL out");
  *out = NULL;
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "tensor_to_string: NULL tensor");
  const tstor_dtype_info *d = tstor_dtype_info_of(t->dtype);
  tstor_context *ctx = t->storage->ctx;
  const tstor__devtype *dt = &ctx->types[t->storage->device.type];
  char suffixes[4][160];
  int ns = 0;
  sbuf b = {0};
  sb_add(&b, "tensor(");
  const int indent = 7;
  /* every device but cpu is named, as PyTorch names all but its default */
  if (!((dt->ops.flags & TSTOR_DEVICE_HOST) && strcmp(dt->name, "cpu") == 0)) {
    if ((dt->ops.flags & (TSTOR_DEVICE_HOST | TSTOR_DEVICE_NO_DATA)) && t->storage->device.index == 0)
      snprintf(suffixes[ns++], 160, "device='%s'", dt->name);
    else
      snprintf(suffixes[ns++], 160, "device='%s:%d'", dt->name, (int)t->storage->device.index);
  }
  int default_dtype = t->dtype == TSTOR_FLOAT32 || t->dtype == TSTOR_COMPLEX64 ||
                      t->dtype == TSTOR_INT64 || t->dtype == TSTOR_BOOL;
  int rc = 0;
  if (!tstor__tensor_has_data(t)) {
    size_suffix(t, suffixes[ns++], 160);
    if (t->dtype != TSTOR_FLOAT32) snprintf(suffixes[ns++], 160, "dtype=torch.%s", d->name);
    sb_add(&b, "...");
  } else if (t->numel == 0) {
    if (t->ndim != 1) size_suffix(t, suffixes[ns++], 160);
    if (t->dtype != TSTOR_FLOAT32) snprintf(suffixes[ns++], 160, "dtype=torch.%s", d->name);
    sb_add(&b, "[]");
  } else {
    if (!default_dtype) snprintf(suffixes[ns++], 160, "dtype=torch.%s", d->name);
    rc = print_values(t, &b, indent);
  }
  if (!rc) add_suffixes(&b, suffixes, ns, indent);
  if (!rc && b.failed)
    rc = tstor__err(TSTOR_ENOMEM, "no memory to print a tensor of %" PRId64 " elements", t->numel);
  /* the caller frees with free(): a plain malloc, outside the core's
   * accounting of its own allocations */
  char *copy = rc ? NULL : malloc(b.len + 1);
  if (!rc && copy == NULL)
    rc = tstor__err(TSTOR_ENOMEM, "no memory for a %zu-byte string", b.len + 1);
  if (copy) memcpy(copy, b.p, b.len + 1);
  tstor__free(b.p);
  *out = copy;
  return rc;
}

int tstor_tensor_print(FILE *f, const tstor_tensor *t) {
  if (f == NULL) return tstor__err(TSTOR_EINVAL, "tensor_print: NULL file");
  char *s;
  int rc = tstor_tensor_to_string(t, &s);
  if (rc) return rc;
  int ok = fputs(s, f) >= 0 && fputc('\n', f) != EOF;
  free(s);
  return ok ? 0 : tstor__err(TSTOR_EIO, "tensor_print: write failed");
}
