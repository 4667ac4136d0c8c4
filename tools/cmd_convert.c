/* tstor convert: between torch.save, safetensors, Torch7 and GGUF files, the
 * whole tree or the part --select and --flatten name; GGUF's
 * quantized tensors decoded with --dequantize. Every message that quotes the
 * file goes through tool_complain's escaping. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tstor/serialize.h>

#include "commands.h"
#include "terminal.h"

static int ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && strcmp(s + a - b, tail) == 0;
}

static int select_value(tstor_loaded *f, const char *select) {
  const tstor_value *v;
  int rc = tstor_checkpoint_find(f->ck, select, &v);
  if (rc == TSTOR_ENOENT) {
    tool_complain("tstor convert: no value named '%s' (tstor inspect lists the names)", select);
    return EXIT_FAILED;
  }
  if (rc) { /* a shared dotted name (the message gives each exact name), or the names' bound */
    tool_complain("tstor convert: --select: %s", tstor_last_error());
    return EXIT_FAILED;
  }
  tstor_checkpoint_set_root(f->ck, (tstor_value *)v);
  return 0;
}

/* --flatten's dict, built as the tensors are visited. */
typedef struct flat_dict {
  tstor_checkpoint *ck;
  tstor_value *root;
  size_t tensors, others;
} flat_dict;

static int add_flat(void *arg, const tstor_value_name *name) {
  flat_dict *fl = arg;
  if (!tool_is_tensor(name->value)) {
    fl->others++;
    return 0;
  }
  if (name->ambiguous) { /* refused rather than one of them silently dropped */
    const tstor_value *v;
    tstor_checkpoint_find(fl->ck, name->dotted, &v); /* its message names every one */
    tool_complain("tstor convert: --flatten: %s", tstor_last_error());
    return TSTOR_EINVAL;
  }
  tstor_value *key;
  int rc = tstor_value_new_string(fl->ck, name->dotted, strlen(name->dotted), &key);
  if (!rc) rc = tstor_value_dict_set(fl->root, key, (tstor_value *)name->value);
  fl->tensors += rc == 0;
  return rc;
}

/* The tensors as one dict of their dotted names; two values with one name
 * are refused, naming each by its exact name, rather than one silently
 * dropped. */
static int flatten(tstor_loaded *f) {
  flat_dict fl = {f->ck, NULL, 0, 0};
  int rc = tstor_value_new(f->ck, TSTOR_VALUE_DICT, &fl.root);
  if (!rc) rc = tstor_checkpoint_visit(f->ck, TSTOR_VISIT_VALUES, add_flat, &fl);
  if (rc == TSTOR_EINVAL) {
    fprintf(stderr, "  (--select one subtree by its exact name, or convert without --flatten)\n");
    return EXIT_FAILED;
  }
  if (!rc) rc = tstor_checkpoint_set_root(f->ck, fl.root);
  if (rc) {
    tool_complain("tstor convert: --flatten: %s", tstor_last_error());
    return EXIT_FAILED;
  }
  if (fl.others)
    fprintf(stderr,
            "tstor convert: --flatten keeps the %zu tensors and leaves out %zu other values\n",
            fl.tensors, fl.others);
  return 0;
}

/* --state-dict: the selected Lua nn module's parameters and buffers, named
 * as PyTorch names the equivalent module's, in *sd. */
static int state_dict(tstor_loaded *f, tstor_checkpoint **sd) {
  int rc = tstor_torch7_state_dict(f->ck, sd);
  if (rc == 0) return 0;
  tool_complain("tstor convert: --state-dict: %s", tstor_last_error());
  if (tstor_value_kind_of(tstor_checkpoint_root(f->ck)) != TSTOR_VALUE_OBJECT)
    fprintf(stderr, "  (--select the model first: tstor inspect lists the file's values)\n");
  return EXIT_FAILED;
}

/* The quantized tensors, counted, and the first one's name and type. */
typedef struct quantized_count {
  size_t n;
  char *first;
  int type;
} quantized_count;

static int count_quantized(void *arg, const tstor_value_name *name) {
  quantized_count *q = arg;
  if (tstor_value_kind_of(name->value) != TSTOR_VALUE_QUANTIZED || q->n++) return 0;
  q->type = tstor_value_ggml_type(name->value);
  return (q->first = strdup(name->dotted)) ? 0 : TSTOR_ENOMEM;
}

/* Quantized tensors go into a format without quantized types only decoded
 * (--dequantize); otherwise the conversion stops here, saying which. */
static int quantized_check(tstor_loaded *f, tstor_file_format to, int dequantize, tstor_dtype dt) {
  if (dequantize) {
    int err = tstor_checkpoint_dequantize(f->ck, dt);
    if (err) tool_complain("tstor convert: --dequantize: %s", tstor_last_error());
    return err ? EXIT_FAILED : 0;
  }
  if (to == TSTOR_FORMAT_GGUF) return 0;
  quantized_count q = {0, NULL, 0};
  int err = tstor_checkpoint_visit(f->ck, TSTOR_VISIT_TENSORS, count_quantized, &q);
  if (err)
    tool_complain("tstor convert: %s", tstor_last_error());
  else if (q.n)
    tool_complain(
        "tstor convert: %zu tensors are quantized (the first, '%s', is %s), and %s has no "
        "quantized types: --dequantize writes them as float32 (--dequantize=float16 or "
        "=bfloat16 smaller), or convert to a .gguf file",
        q.n, q.first, tstor_ggml_type_name(q.type), tstor_file_format_name(to));
  free(q.first);
  return err || q.n ? EXIT_FAILED : 0;
}

/* safetensors' metadata holds strings only: a GGUF file's other entries
 * (numbers, lists such as a tokenizer's vocabulary) are left out, and said. */
static int strings_only_metadata(tstor_loaded *f) {
  const tstor_value *md = tstor_checkpoint_metadata(f->ck);
  size_t n = tstor_value_len(md), kept = 0;
  tstor_value *keep = NULL;
  int err = n ? tstor_value_new(f->ck, TSTOR_VALUE_DICT, &keep) : 0;
  for (size_t i = 0; i < n && !err; i++)
    if (tstor_value_kind_of(tstor_value_item(md, i)) == TSTOR_VALUE_STRING) {
      err = tstor_value_dict_set(keep, (tstor_value *)tstor_value_key(md, i),
                                 (tstor_value *)tstor_value_item(md, i));
      kept++;
    }
  if (!err && kept < n) {
    err = tstor_checkpoint_set_metadata(f->ck, keep);
    fprintf(stderr,
            "tstor convert: safetensors metadata holds strings: %zu of the %zu metadata entries "
            "are left out\n",
            n - kept, n);
  }
  if (err) tool_complain("tstor convert: %s", tstor_last_error());
  return err ? EXIT_FAILED : 0;
}

static tstor_file_format format_for(const char *out) {
  return ends_with(out, ".safetensors") ? TSTOR_FORMAT_SAFETENSORS
         : ends_with(out, ".t7")        ? TSTOR_FORMAT_TORCH7
         : ends_with(out, ".gguf")      ? TSTOR_FORMAT_GGUF
                                        : TSTOR_FORMAT_TORCH;
}

static void print_help(void) {
  printf(
      "usage: tstor convert [--select NAME] [--flatten | --state-dict] [--copy]\n"
      "                     [--dequantize[=DTYPE]] [--config FILE] IN OUT\n\n"
      "Converts between torch.save (.pt, any of its formats), safetensors, Torch7\n"
      "(.t7) and GGUF files. IN's format is told by its bytes; OUT's is safetensors\n"
      "when its name ends in .safetensors, Torch7 when it ends in .t7, GGUF when it\n"
      "ends in .gguf, torch.save otherwise.\n"
      "--select NAME writes only the value of that name, as tstor inspect names it\n"
      "(\"model\" of a training checkpoint, or an exact name such as ['a.b']);\n"
      "--flatten writes the tensors as one dict of their names\n"
      "(\"model.layer1.weight\"), what a safetensors file holds, and leaves the other\n"
      "values out; two tensors whose names are the same are refused.\n"
      "--state-dict writes a Lua Torch nn module (the file's root, or the value\n"
      "--select names) as a PyTorch state_dict: the parameters and buffers of the\n"
      "equivalent PyTorch module, named as it names them (\"0.weight\",\n"
      "\"2.running_mean\"), for load_state_dict(strict=True). safetensors has no\n"
      "shared storage: tensors that share one are refused unless --copy writes\n"
      "each as its own copy.\n"
      "A GGUF file's quantized tensors (Q4_K...) go into a GGUF file as they are, so\n"
      "that GGUF to GGUF gives the same file; the other formats have no quantized\n"
      "types, and take them only decoded: --dequantize writes them as float32,\n"
      "--dequantize=float16 or --dequantize=bfloat16 rounded to those. The same\n"
      "for a torch.save file's quantized tensors (qint8, quint8, qint32), which\n"
      "--dequantize decodes as torch's dequantize() does. GGUF's\n"
      "metadata goes into GGUF and, its strings only, safetensors.\n"
      "Exit status: 0, 1 for a file that cannot be read or written, 2 for bad usage.\n");
}

int tstor_cmd_convert(int argc, char **argv) {
  const char *config = NULL, *in = NULL, *out = NULL, *select = NULL;
  unsigned flags = 0;
  int flat = 0, sd = 0, dequantize = 0;
  tstor_dtype deq_dtype = TSTOR_FLOAT32;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      config = argv[++i];
    } else if (strcmp(argv[i], "--select") == 0 && i + 1 < argc) {
      select = argv[++i];
    } else if (strcmp(argv[i], "--flatten") == 0) {
      flat = 1;
    } else if (strcmp(argv[i], "--state-dict") == 0) {
      sd = 1;
    } else if (strcmp(argv[i], "--copy") == 0) {
      flags |= TSTOR_SAVE_COPY_SHARED;
    } else if (strncmp(argv[i], "--dequantize", 12) == 0 &&
               (argv[i][12] == '\0' || argv[i][12] == '=')) {
      const char *dt = argv[i][12] ? argv[i] + 13 : "float32";
      dequantize = 1;
      if (strcmp(dt, "float32") == 0)
        deq_dtype = TSTOR_FLOAT32;
      else if (strcmp(dt, "float16") == 0)
        deq_dtype = TSTOR_FLOAT16;
      else if (strcmp(dt, "bfloat16") == 0)
        deq_dtype = TSTOR_BFLOAT16;
      else {
        tool_complain("tstor convert: --dequantize=%s: float32, float16 or bfloat16", dt);
        return EXIT_USAGE;
      }
    } else if (strcmp(argv[i], "--help") == 0) {
      print_help();
      return 0;
    } else if (argv[i][0] == '-' || (in && out)) {
      tool_complain("tstor convert: unexpected argument '%s' (try tstor convert --help)", argv[i]);
      return EXIT_USAGE;
    } else if (!in) {
      in = argv[i];
    } else {
      out = argv[i];
    }
  }
  if (!in || !out) {
    fprintf(stderr, "tstor convert: needs IN and OUT (try tstor convert --help)\n");
    return EXIT_USAGE;
  }
  if (flat && sd) {
    fprintf(stderr, "tstor convert: --flatten or --state-dict, not both\n");
    return EXIT_USAGE;
  }
  tstor_loaded f;
  int rc = tstor_load_for_command(config, in, 0, &f);
  if (rc) return rc;
  if (select) rc = select_value(&f, select);
  if (!rc && flat) rc = flatten(&f);
  tstor_file_format to = format_for(out);
  if (!rc) rc = quantized_check(&f, to, dequantize, deq_dtype);
  if (!rc && to == TSTOR_FORMAT_SAFETENSORS) rc = strings_only_metadata(&f);
  tstor_checkpoint *dict = NULL;
  if (!rc && sd) rc = state_dict(&f, &dict);
  if (!rc) {
    tstor_save_options opts = TSTOR_SAVE_OPTIONS_INIT;
    if (to == TSTOR_FORMAT_SAFETENSORS) opts.flags = flags; /* the one format that takes them */
    int err = tstor_checkpoint_save(dict ? dict : f.ck, out, to, &opts);
    if (err) {
      /* most of the savers' messages name the file already */
      const char *why = tstor_last_error();
      int named = strncmp(why, out, strlen(out)) == 0 && why[strlen(out)] == ':';
      tool_complain("tstor convert: %s%s%s (%s)", named ? "" : out, named ? "" : ": ", why,
                    tstor_err_name(err));
      rc = EXIT_FAILED;
    }
  }
  tstor_checkpoint_free(dict);
  tstor_unload_for_command(&f);
  return rc;
}
