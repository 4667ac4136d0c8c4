/* A Lua nn module's parameters and buffers as a PyTorch state_dict
 * (serialize.h's tstor_torch7_state_dict): the migration Torch7 users want.
 *
 * A container (any module with a `modules` table: nn.Sequential, Concat,
 * ConcatTable, Parallel, ParallelTable, DepthConcat, nngraph's gModule, whose
 * `modules` are in forward order) names its children by their place,
 * counted from 0 as PyTorch's nn.Sequential names them, parameter-less ones
 * counted too: "0.weight", "2.1.bias". Any other module gives its weight and
 * bias (parameters) and running_mean and running_var (batch normalization's
 * buffers), in that order, where they are tensors with elements; gradWeight,
 * gradBias, output, gradInput and the like are scratch and left out.
 * SpatialConvolutionMM keeps its weight as (nOutputPlane, nInputPlane * kH *
 * kW): it becomes (nOutputPlane, nInputPlane, kH, kW), a view of the same
 * bytes, as Conv2d holds it. Batch normalization from before nn kept
 * running_std instead of running_var, which is refused by name. */
#include "io_internal.h"

#include <stdio.h>
#include <string.h>

#include <tstor/tensor.h>

typedef struct sd_builder {
  tstor_checkpoint *out;
  tstor_value *dict;
  int depth;
} sd_builder;

static const tstor_value *field(const tstor_value *module, const char *name) {
  return tstor_value_dict_get(tstor_value_object_state(module), name);
}

static int field_int(const tstor_value *module, const char *name, int64_t *out) {
  const tstor_value *v = field(module, name);
  if (!v || tstor_value_kind_of(v) != TSTOR_VALUE_INT) return -1;
  *out = tstor_value_int(v);
  return 0;
}

/* A 2-d SpatialConvolutionMM weight as Conv2d's 4-d one. */
static int conv_weight(const tstor_value *module, tstor_tensor *w, tstor_tensor **out) {
  int64_t planes, kw, kh, n;
  if (field_int(module, "nInputPlane", &planes) || field_int(module, "kW", &kw) ||
      field_int(module, "kH", &kh) || tstor_tensor_size(w, 0, &n))
    return TSTOR__ERR(TSTOR_EINVAL, "%s: a 2-d weight without nInputPlane, kW and kH",
                      tstor_value_object_class(module));
  int64_t sizes[4] = {n, planes, kh, kw};
  return tstor_tensor_reshape(w, 4, sizes, out);
}

static int add_tensor(sd_builder *b, const char *prefix, const char *name,
                      const tstor_value *module, const tstor_value *v) {
  tstor_tensor *t = tstor_value_tensor(v), *held = NULL;
  if (!t || tstor_tensor_numel(t) == 0) return 0;
  int rc = 0;
  if (strcmp(name, "weight") == 0 && tstor_tensor_dim(t) == 2 &&
      strstr(tstor_value_object_class(module), "SpatialConvolution"))
    rc = conv_weight(module, t, &held);
  char key[TSTOR_CHECKPOINT_MAX_DEPTH * 12 + 32];
  snprintf(key, sizeof key, "%s%s", prefix, name);
  tstor_value *k, *tv;
  if (!rc) rc = tstor_value_new_string(b->out, key, strlen(key), &k);
  if (!rc) rc = tstor_value_new_tensor(b->out, held ? held : t, &tv);
  if (!rc) rc = tstor_value_dict_set(b->dict, k, tv);
  tstor_tensor_release(held);
  return rc;
}

static int add_module(sd_builder *b, const tstor_value *module, const char *prefix);

static int add_children(sd_builder *b, const tstor_value *modules, const char *prefix) {
  /* a Lua array: keys 1..n, in any order in the file */
  size_t n = tstor_value_len(modules);
  for (size_t i = 1; i <= n; i++) {
    const tstor_value *child = NULL;
    for (size_t j = 0; j < n && !child; j++) {
      const tstor_value *k = tstor_value_key(modules, j);
      if (tstor_value_kind_of(k) == TSTOR_VALUE_INT && tstor_value_int(k) == (int64_t)i)
        child = tstor_value_item(modules, j);
    }
    if (!child)
      return TSTOR__ERR(TSTOR_EINVAL, "%smodules: not a list of modules (no index %zu of %zu)",
                        prefix, i, n);
    char sub[TSTOR_CHECKPOINT_MAX_DEPTH * 12 + 32];
    snprintf(sub, sizeof sub, "%s%zu.", prefix, i - 1);
    int rc = add_module(b, child, sub);
    if (rc) return rc;
  }
  return 0;
}

static int add_module(sd_builder *b, const tstor_value *module, const char *prefix) {
  if (tstor_value_kind_of(module) != TSTOR_VALUE_OBJECT)
    return TSTOR__ERR(TSTOR_EINVAL, "%s: a %s, not an nn module", *prefix ? prefix : "the root",
                      tstor_value_kind_name(tstor_value_kind_of(module)));
  if (++b->depth > TSTOR_CHECKPOINT_MAX_DEPTH)
    return TSTOR__ERR(TSTOR_EINVAL, "modules nest deeper than %d levels",
                      TSTOR_CHECKPOINT_MAX_DEPTH);
  int rc = 0;
  const tstor_value *modules = field(module, "modules");
  if (modules && tstor_value_kind_of(modules) == TSTOR_VALUE_DICT) {
    rc = add_children(b, modules, prefix);
  } else if (field(module, "running_std") && !field(module, "running_var")) {
    rc = TSTOR__ERR(TSTOR_ENOTSUP,
                    "%s%s: running_std, batch normalization's buffer before nn kept "
                    "running_var, is not converted",
                    prefix, tstor_value_object_class(module));
  } else {
    static const char *const names[] = {"weight", "bias", "running_mean", "running_var"};
    for (size_t i = 0; i < sizeof names / sizeof *names && !rc; i++) {
      const tstor_value *v = field(module, names[i]);
      if (v) rc = add_tensor(b, prefix, names[i], module, v);
    }
  }
  b->depth--;
  return rc;
}

int tstor_torch7_state_dict(const tstor_checkpoint *ck, tstor_checkpoint **out) {
  if (!out) return TSTOR__ERR(TSTOR_EINVAL, "tstor_torch7_state_dict: NULL out");
  *out = NULL;
  if (!ck || !ck->root)
    return TSTOR__ERR(TSTOR_EINVAL,
                      "tstor_torch7_state_dict: no checkpoint, or one without a root");
  sd_builder b = {NULL, NULL, 0};
  int rc = tstor_checkpoint_new(&b.out);
  if (!rc) rc = tstor_value_new(b.out, TSTOR_VALUE_DICT, &b.dict);
  if (!rc) rc = add_module(&b, ck->root, "");
  if (!rc) rc = tstor_checkpoint_set_root(b.out, b.dict);
  if (rc) {
    tstor_checkpoint_free(b.out);
    return rc;
  }
  *out = b.out;
  return 0;
}
