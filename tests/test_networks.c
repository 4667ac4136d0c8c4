/* Whole networks planned on tstor's meta device: every call that torch
 * 2.15's meta device made running torchvision's resnet18 (contiguous and
 * channels-last), mobilenet_v3_small and two torch.nn transformer encoder
 * layers (tests/vectors/networks_torch2.txt, from gen_networks.py; 1.13's
 * record is networks.txt) is replayed
 * through tstor's shape inference and view operations, each output's sizes,
 * strides and dtype compared with PyTorch's. */
#define _GNU_SOURCE
#include "coretest.h"

#include <inttypes.h>
#include <stdint.h>
#include <tstor/shape.h>

#include "shapetest.h"

static tstor_context *ctx;
static tstor_device meta;

static void setup(void) {
  ctx = coretest_open(NULL);
  meta = coretest_dev(ctx, "meta");
}
static void teardown(void) { tstor_context_close(ctx); }

#define MAX_IDS 4096
#define MAX_TOKENS 16
#define MAX_OUTS 4

/* ------------------------------------------------------------- parsing */

static void parse_layout(const char *s, tstor_layout *l, int line) {
  char name[32];
  const char *c = strchr(s, ':');
  ck_assert_msg(c != NULL, "networks_torch2.txt:%d: bad layout %s", line, s);
  snprintf(name, sizeof name, "%.*s", (int)(c - s), s);
  ck_tstor_ok(tstor_dtype_parse(name, &l->dtype));
  int n = 0;
  const char *p = c + 1;
  while (*p && *p != ':') {
    char *end;
    l->sizes[n++] = strtoll(p, &end, 10);
    p = *end == ',' ? end + 1 : end;
  }
  l->ndim = n;
  ck_assert_int_eq(*p, ':');
  p++;
  for (int i = 0; i < n; i++) {
    char *end;
    l->strides[i] = strtoll(p, &end, 10);
    p = *end == ',' ? end + 1 : end;
  }
}

static int parse_ints(const char *s, int64_t *out) {
  int n = 0;
  while (*s) {
    char *end;
    out[n++] = strtoll(s, &end, 10);
    if (end == s) break;
    s = *end == ',' ? end + 1 : end;
  }
  return n;
}

/* One recorded call. */
typedef struct call {
  int line;
  char op[32];
  int outs[MAX_OUTS], nouts;
  char *tok[MAX_TOKENS];
  int ntok;
  tstor_layout want[MAX_OUTS];
} call;

static tstor_tensor *ids[MAX_IDS];

static tstor_tensor *tensor_arg(const call *c, int i) {
  ck_assert_msg(i < c->ntok, "networks_torch2.txt:%d: %s: argument %d missing", c->line, c->op, i);
  const char *t = c->tok[i];
  if (t[0] == 'n') return NULL;
  ck_assert_msg(t[0] == '%', "networks_torch2.txt:%d: argument %d is not a tensor: %s", c->line, i,
                t);
  int id = atoi(t + 1);
  ck_assert_msg(id >= 0 && id < MAX_IDS && ids[id], "networks_torch2.txt:%d: %s is unknown",
                c->line, t);
  return ids[id];
}

static int64_t int_arg(const call *c, int i) {
  ck_assert_msg(i < c->ntok && c->tok[i][0] == 'i',
                "networks_torch2.txt:%d: argument %d: want i:", c->line, i);
  return strtoll(c->tok[i] + 2, NULL, 10);
}

static double real_arg(const call *c, int i) {
  ck_assert_msg(i < c->ntok && c->tok[i][0] == 'f',
                "networks_torch2.txt:%d: argument %d: want f:", c->line, i);
  return strtod(c->tok[i] + 2, NULL);
}

static int list_arg(const call *c, int i, int64_t *out) {
  ck_assert_msg(i < c->ntok && c->tok[i][0] == 'l',
                "networks_torch2.txt:%d: argument %d: want l:", c->line, i);
  return parse_ints(c->tok[i] + 2, out);
}

/* ------------------------------------------------------------- replaying */

static int activation_of(const char *op) {
  if (!strcmp(op, "relu")) return TSTOR_ACT_RELU;
  if (!strcmp(op, "gelu")) return TSTOR_ACT_GELU;
  if (!strcmp(op, "hardswish")) return TSTOR_ACT_HARDSWISH;
  if (!strcmp(op, "hardsigmoid")) return TSTOR_ACT_HARDSIGMOID;
  return -1;
}

/* An in-place op: PyTorch's result is self, its layout unchanged; tstor must
 * accept the op, with the result's shape and dtype being self's. */
static int in_place(const call *c, tstor_tensor *self, tstor_tensor *computed, tstor_tensor **out) {
  tstor_layout a, b;
  ck_tstor_ok(tstor_layout_of(self, &a));
  ck_tstor_ok(tstor_layout_of(computed, &b));
  ck_assert_msg(a.ndim == b.ndim && !memcmp(a.sizes, b.sizes, sizeof(int64_t) * (size_t)a.ndim) &&
                    a.dtype == b.dtype,
                "networks_torch2.txt:%d: %s in place would change self", c->line, c->op);
  tstor_tensor_release(computed);
  *out = tstor_tensor_retain(self);
  return 0;
}

/* Runs one call; writes its outputs into outs. */
static int replay(const call *c, tstor_tensor **outs, int *nouts) {
  const char *op = c->op;
  int rc;
  *nouts = 1;
  outs[0] = NULL;
  int act = activation_of(op);
  int64_t l1[TSTOR_TENSOR_MAX_DIM], l2[TSTOR_TENSOR_MAX_DIM], l3[TSTOR_TENSOR_MAX_DIM];
  if (!strcmp(op, "input") || !strcmp(op, "param")) {
    return tstor_layout_empty(ctx, meta, &c->want[0], &outs[0]);
  } else if (!strcmp(op, "conv2d")) {
    /* input weight bias stride padding dilation groups */
    tstor_conv_params p = TSTOR_CONV_PARAMS_INIT(2);
    list_arg(c, 3, l1);
    list_arg(c, 5, l3);
    for (int i = 0; i < 2; i++) {
      p.stride[i] = l1[i];
      p.dilation[i] = l3[i];
    }
    if (c->tok[4][0] == 'w') {
      p.padding_mode = !strcmp(c->tok[4] + 2, "same") ? TSTOR_CONV_PADDING_SAME
                                                      : TSTOR_CONV_PADDING_VALID;
    } else {
      list_arg(c, 4, l2);
      p.padding[0] = l2[0];
      p.padding[1] = l2[1];
    }
    p.groups = int_arg(c, 6);
    return tstor_shape_conv(tensor_arg(c, 0), tensor_arg(c, 1), tensor_arg(c, 2), &p, &outs[0]);
  } else if (!strcmp(op, "batch_norm")) {
    /* input running_mean running_var weight bias training momentum eps */
    return tstor_shape_batch_norm(tensor_arg(c, 0), tensor_arg(c, 1), tensor_arg(c, 2),
                                  tensor_arg(c, 3), tensor_arg(c, 4), (int)int_arg(c, 5),
                                  &outs[0]);
  } else if (!strcmp(op, "layer_norm")) {
    int n = list_arg(c, 1, l1);
    return tstor_shape_layer_norm(tensor_arg(c, 0), n, l1, tensor_arg(c, 2), tensor_arg(c, 3),
                                  &outs[0]);
  } else if (act >= 0) {
    tstor_tensor *r = NULL;
    int inplace = strcmp(op, "gelu") != 0 && int_arg(c, 1);
    if ((rc = tstor_shape_activation((tstor_activation)act, tensor_arg(c, 0), &r)) < 0) return rc;
    if (inplace) return in_place(c, tensor_arg(c, 0), r, &outs[0]);
    outs[0] = r;
    return 0;
  } else if (!strcmp(op, "dropout")) {
    tstor_tensor *r = NULL;
    rc = tstor_shape_dropout(tensor_arg(c, 0), real_arg(c, 1), (int)int_arg(c, 2), &r);
    if (rc < 0) return rc;
    if (int_arg(c, 3)) return in_place(c, tensor_arg(c, 0), r, &outs[0]);
    outs[0] = r;
    return 0;
  } else if (!strcmp(op, "max_pool2d")) {
    /* input kernel stride padding dilation ceil_mode return_indices */
    list_arg(c, 1, l1);
    tstor_pool_params p = TSTOR_POOL_PARAMS_INIT(l1[0], l1[1]);
    list_arg(c, 2, l2);
    list_arg(c, 3, l3);
    p.stride[0] = l2[0];
    p.stride[1] = l2[1];
    p.padding[0] = l3[0];
    p.padding[1] = l3[1];
    list_arg(c, 4, l1);
    p.dilation[0] = l1[0];
    p.dilation[1] = l1[1];
    p.ceil_mode = (int)int_arg(c, 5);
    ck_assert_int_eq(int_arg(c, 6), 0);
    return tstor_shape_max_pool2d(tensor_arg(c, 0), &p, &outs[0]);
  } else if (!strcmp(op, "adaptive_avg_pool2d")) {
    list_arg(c, 1, l1);
    return tstor_shape_adaptive_avg_pool2d(tensor_arg(c, 0), l1, &outs[0]);
  } else if (!strcmp(op, "flatten")) {
    return tstor_tensor_flatten(tensor_arg(c, 0), (int)int_arg(c, 1), (int)int_arg(c, 2),
                                &outs[0]);
  } else if (!strcmp(op, "linear")) {
    return tstor_shape_linear(tensor_arg(c, 0), tensor_arg(c, 1), tensor_arg(c, 2), &outs[0]);
  } else if (!strcmp(op, "add") || !strcmp(op, "mul") || !strcmp(op, "add_")) {
    tstor_tensor *r = NULL;
    rc = tstor_shape_binary(TSTOR_ELEMENTWISE_PROMOTE, tensor_arg(c, 0), tensor_arg(c, 1), &r);
    if (rc < 0) return rc;
    if (op[3] == '_') return in_place(c, tensor_arg(c, 0), r, &outs[0]);
    outs[0] = r;
    return 0;
  } else if (!strcmp(op, "div")) {
    ck_assert_int_eq(c->tok[1][0], 'f'); /* a tensor by a Python float */
    return tstor_shape_binary_number(TSTOR_ELEMENTWISE_FLOAT, tensor_arg(c, 0), TSTOR_FLOAT64,
                                     &outs[0]);
  } else if (!strcmp(op, "bmm")) {
    return tstor_shape_bmm(tensor_arg(c, 0), tensor_arg(c, 1), &outs[0]);
  } else if (!strcmp(op, "softmax")) {
    if (c->tok[3][0] == 'd') {
      tstor_dtype d;
      ck_tstor_ok(tstor_dtype_parse(c->tok[3] + 2, &d));
      return tstor_shape_softmax_dtype(tensor_arg(c, 0), int_arg(c, 1), d, &outs[0]);
    }
    return tstor_shape_softmax(tensor_arg(c, 0), int_arg(c, 1), &outs[0]);
  } else if (!strcmp(op, "chunk")) {
    tstor_tensor **list = NULL;
    int n = 0;
    rc = tstor_tensor_chunk(tensor_arg(c, 0), (int)int_arg(c, 1), (int)int_arg(c, 2), &n, &list);
    if (rc < 0) return rc;
    ck_assert_int_le(n, MAX_OUTS);
    for (int i = 0; i < n; i++) outs[i] = tstor_tensor_retain(list[i]);
    tstor_tensor_list_free(list, n);
    *nouts = n;
    return 0;
  } else if (!strcmp(op, "contiguous")) {
    return tstor_tensor_contiguous(tensor_arg(c, 0), &outs[0]);
  } else if (!strcmp(op, "transpose")) {
    return tstor_tensor_transpose(tensor_arg(c, 0), (int)int_arg(c, 1), (int)int_arg(c, 2),
                                  &outs[0]);
  } else if (!strcmp(op, "view")) {
    int n = list_arg(c, 1, l1);
    return tstor_tensor_view(tensor_arg(c, 0), n, l1, &outs[0]);
  } else if (!strcmp(op, "reshape")) {
    int n = list_arg(c, 1, l1);
    return tstor_tensor_reshape(tensor_arg(c, 0), n, l1, &outs[0]);
  } else if (!strcmp(op, "permute")) {
    int n = list_arg(c, 1, l1);
    return tstor_tensor_permute(tensor_arg(c, 0), n, l1, &outs[0]);
  } else if (!strcmp(op, "unflatten")) {
    int n = list_arg(c, 2, l1);
    return tstor_tensor_unflatten(tensor_arg(c, 0), int_arg(c, 1), n, l1, &outs[0]);
  } else if (!strcmp(op, "unsqueeze")) {
    return tstor_tensor_unsqueeze(tensor_arg(c, 0), int_arg(c, 1), &outs[0]);
  } else if (!strcmp(op, "squeeze")) {
    return tstor_tensor_squeeze_dim(tensor_arg(c, 0), int_arg(c, 1), &outs[0]);
  } else if (!strcmp(op, "__getitem__")) {
    return tstor_tensor_select(tensor_arg(c, 0), 0, int_arg(c, 1), &outs[0]);
  } else if (!strcmp(op, "scaled_dot_product_attention")) {
    /* query key value attn_mask dropout_p is_causal scale enable_gqa */
    ck_assert_msg(c->ntok > 3 && !strcmp(c->tok[3], "n:"), "networks_torch2.txt:%d: a mask",
                  c->line);
    return tstor_shape_scaled_dot_product_attention(tensor_arg(c, 0), tensor_arg(c, 1),
                                                    tensor_arg(c, 2), &outs[0]);
  }
  ck_abort_msg("networks_torch2.txt:%d: no replay for %s", c->line, op);
  return TSTOR_ENOTSUP;
}

/* Replays the network whose "net" line is at *at; returns the calls made and
 * adds to *differ. */
static int run_net(FILE *f, int *line, const char *label, int *differ, uint64_t *bytes) {
  char buf[8192];
  int calls = 0;
  memset(ids, 0, sizeof ids);
  while (fgets(buf, sizeof buf, f)) {
    (*line)++;
    buf[strcspn(buf, "\n")] = 0;
    if (!strncmp(buf, "end ", 4)) break;
    call c;
    memset(&c, 0, sizeof c);
    c.line = *line;
    char *save = NULL, *outs = strtok_r(buf, " ", &save);
    ck_assert_str_eq(strtok_r(NULL, " ", &save), "=");
    snprintf(c.op, sizeof c.op, "%s", strtok_r(NULL, " ", &save));
    char *tok;
    int after = 0, nwant = 0;
    while ((tok = strtok_r(NULL, " ", &save))) {
      if (!strcmp(tok, "=>")) after = 1;
      else if (after) parse_layout(tok, &c.want[nwant++], c.line);
      else c.tok[c.ntok++] = tok;
    }
    char *osave = NULL;
    for (char *o = strtok_r(outs, ",", &osave); o; o = strtok_r(NULL, ",", &osave))
      c.outs[c.nouts++] = atoi(o + 1);
    ck_assert_int_eq(c.nouts, nwant);
    tstor_tensor *got[MAX_OUTS] = {0};
    int n = 0;
    int rc = replay(&c, got, &n);
    calls++;
    if (rc < 0) {
      fprintf(stderr, "networks_torch2.txt:%d: %s %s: %s: %s\n", c.line, label, c.op,
              tstor_err_name(rc), tstor_last_error());
      (*differ)++;
      /* later calls need the output: stand in PyTorch's */
      for (int i = 0; i < c.nouts; i++) ck_tstor_ok(tstor_layout_empty(ctx, meta, &c.want[i], &got[i]));
      n = c.nouts;
    }
    ck_assert_int_eq(n, c.nouts);
    for (int i = 0; i < n; i++) {
      tstor_layout l;
      ck_tstor_ok(tstor_layout_of(got[i], &l));
      ck_assert_int_eq(tstor_tensor_device(got[i]).type, meta.type);
      if (!shapetest_same_layout(&l, &c.want[i])) {
        char g[1200], w[1200];
        fprintf(stderr, "networks_torch2.txt:%d: %s %s: got %s, want %s\n", c.line, label, c.op,
                shapetest_layout_str(g, sizeof g, &l),
                shapetest_layout_str(w, sizeof w, &c.want[i]));
        (*differ)++;
      }
      if (strcmp(c.op, "param") != 0) *bytes += tstor_tensor_nbytes(got[i]);
      ck_assert_int_lt(c.outs[i], MAX_IDS);
      tstor_tensor_release(ids[c.outs[i]]);
      ids[c.outs[i]] = got[i];
    }
  }
  for (int i = 0; i < MAX_IDS; i++) tstor_tensor_release(ids[i]);
  return calls;
}

START_TEST(test_networks_plan_as_pytorch) {
  const char *path = TSTOR_TEST_SRCDIR "/vectors/networks_torch2.txt";
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  char buf[8192];
  int line = 0, nets = 0, total = 0, differ = 0;
  while (fgets(buf, sizeof buf, f)) {
    line++;
    if (strncmp(buf, "net ", 4) != 0) continue;
    char label[128];
    snprintf(label, sizeof label, "%.*s", (int)strcspn(buf + 4, "\n"), buf + 4);
    uint64_t bytes = 0;
    int before = differ;
    int calls = run_net(f, &line, label, &differ, &bytes);
    fprintf(stderr, "%s: %d calls, %.1f MiB of activations planned, %d differ\n", label, calls,
            (double)bytes / (1 << 20), differ - before);
    total += calls;
    nets++;
  }
  fclose(f);
  ck_assert_int_ge(nets, 5);
  ck_assert_int_gt(total, 500);
  ck_assert_int_eq(differ, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("networks");
  TCase *tc = tcase_create("networks");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_networks_plan_as_pytorch);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
