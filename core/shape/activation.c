/* The output layout of activations, as ATen's Activation.cpp and torch 2.x's
 * meta kernels (tests/vectors/shapes_torch2.txt) give it: the elementwise
 * layout (tstor_layout_elementwise); and of dropout, as Dropout.cpp. */
#include "shape/shape_internal.h"

/* ------------------------------------------------------------ activations */

static const char *const activation_names[] = {"relu",    "relu6", "gelu",      "silu",
                                               "sigmoid", "tanh",  "hardswish", "hardsigmoid"};

int tstor_layout_activation(tstor_activation act, const tstor_layout *in, tstor_layout *out) {
  int rc;
  if ((unsigned)act > TSTOR_ACT_HARDSIGMOID)
    return tstor__err(TSTOR_EINVAL, "activation: unknown activation %d", (int)act);
  const char *name = activation_names[act];
  if ((rc = tstor__check_layout(in, name)) < 0) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "%s: out is NULL", name);
  if (tstor__is_quantized(in->dtype))
    return tstor__err(TSTOR_EDTYPE, "%s: quantized %s is not supported", name,
                      tstor_dtype_name(in->dtype));
  /* torch 2.x computes relu, relu6 and hardswish of complex tensors too,
   * and relu of bool; hardtanh (relu6) still refuses bool */
  if (tstor__dtype_category(in->dtype) == TSTOR__CAT_BOOL && act == TSTOR_ACT_RELU6)
    return tstor__err(TSTOR_EDTYPE, "Bool inputs not supported for hardtanh");
  tstor_elementwise_rule rule = act == TSTOR_ACT_SIGMOID || act == TSTOR_ACT_TANH
                                    ? TSTOR_ELEMENTWISE_FLOAT
                                    : TSTOR_ELEMENTWISE_PROMOTE;
  return tstor_layout_elementwise(rule, 1, in, 0, NULL, out);
}

int tstor_layout_dropout(const tstor_layout *in, double p, int training, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(in, "dropout")) < 0) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "dropout: out is NULL");
  if (!(p >= 0.0 && p <= 1.0))
    return tstor__err(TSTOR_EINVAL, "dropout probability has to be between 0 and 1, but got %g", p);
  if (!training) {
    tstor__layout_copy(out, in);
    return 0;
  }
  /* input * empty_like(input).bernoulli_(1 - p).div_(1 - p): the in-place
   * division by a float refuses what cannot hold one */
  int cat = tstor__dtype_category(in->dtype);
  tstor_dtype d = in->dtype;
  if ((cat < TSTOR__CAT_FLOAT || tstor__is_quantized(d)) &&
      (d == TSTOR_UINT16 || d == TSTOR_UINT32 || d == TSTOR_UINT64)) /* torch 2.x's names */
    return tstor__err(TSTOR_EDTYPE,
                      "result type torch.float32 can't be cast to the desired output type torch.%s",
                      tstor_dtype_name(d));
  if (cat < TSTOR__CAT_FLOAT || tstor__is_quantized(d))
    return tstor__err(TSTOR_EDTYPE, "result type Float can't be cast to the desired output type %s",
                      tstor_dtype_info_of(d)->scalar_type);
  tstor_layout ops[2];
  tstor__layout_copy(&ops[0], in);
  tstor__layout_empty_like(in, &ops[1]);
  return tstor_layout_elementwise(TSTOR_ELEMENTWISE_PROMOTE, 2, ops, 0, NULL, out);
}

/* ------------------------------------------------------------ tensor forms */

static int activation_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  return tstor_layout_activation(*(const tstor_activation *)args, in[0], out);
}

int tstor_shape_activation(tstor_activation act, const tstor_tensor *in, tstor_tensor **out) {
  return tstor__shape_form("shape_activation", 1, &in, 1, activation_form, &act, out);
}

/* dropout's p and training. */
typedef struct {
  double p;
  int training;
} dropout_args;

static int dropout_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  const dropout_args *a = args;
  int rc = tstor_layout_dropout(in[0], a->p, a->training, out);
  /* outside training PyTorch returns the input itself */
  return (rc < 0 || a->training) ? rc : TSTOR__SHAPE_IS_INPUT;
}

int tstor_shape_dropout(const tstor_tensor *in, double p, int training, tstor_tensor **out) {
  const dropout_args a = {p, training};
  return tstor__shape_form("shape_dropout", 1, &in, 1, dropout_form, &a, out);
}
