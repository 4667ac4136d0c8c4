/* tstor convert: between torch.save, safetensors and Torch7 files, the whole
 * tree or the part --select and --flatten name (names.h). Every message that
 * quotes the file goes through tool_complain's escaping. */
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
  if (tstor_value_kind_of(name->value) != TSTOR_VALUE_TENSOR) {
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

static void print_help(void) {
  printf(
      "usage: tstor convert [--select NAME] [--flatten | --state-dict] [--copy] [--config FILE]\n"
      "                     IN OUT\n\n"
      "Converts between torch.save (.pt, any of its formats), safetensors and Torch7\n"
      "(.t7) files. IN's format is told by its bytes; OUT's is safetensors when its\n"
      "name ends in .safetensors, Torch7 when it ends in .t7, torch.save otherwise.\n"
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
      "Exit status: 0, 1 for a file that cannot be read or written, 2 for bad usage.\n");
}

int tstor_cmd_convert(int argc, char **argv) {
  const char *config = NULL, *in = NULL, *out = NULL, *select = NULL;
  unsigned flags = 0;
  int flat = 0, sd = 0;
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
  tstor_checkpoint *dict = NULL;
  if (!rc && sd) rc = state_dict(&f, &dict);
  if (!rc) {
    tstor_file_format to = ends_with(out, ".safetensors") ? TSTOR_FORMAT_SAFETENSORS
                           : ends_with(out, ".t7")        ? TSTOR_FORMAT_TORCH7
                                                          : TSTOR_FORMAT_TORCH;
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
