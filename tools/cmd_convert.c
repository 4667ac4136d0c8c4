/* tstor convert: between torch.save, safetensors and Torch7 files, the whole
 * tree or the part --select and --flatten name (names.h). Every message that
 * quotes the file goes through tool_complain's escaping. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tstor/serialize.h>

#include "commands.h"
#include "names.h"
#include "terminal.h"

static int ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && strcmp(s + a - b, tail) == 0;
}

/* The names of the tree under the checkpoint's root, or the exit status
 * after saying why not: a walk cut short would convert part of the file. */
static int names_of(const tstor_loaded *f, tool_names *l) {
  tool_names_collect(l, tstor_checkpoint_root(f->ck), tool_names_budget(f->file_bytes));
  if (l->failed) {
    fprintf(stderr, "tstor convert: out of memory for the names of the file's values\n");
  } else if (l->cut) {
    fprintf(stderr,
            "tstor convert: the names of the file's values pass %zu bytes, the most a file "
            "of %zu bytes may cost (each name repeats every key above it)\n",
            l->budget, f->file_bytes);
  } else {
    return 0;
  }
  tool_names_free(l);
  return EXIT_FAILED;
}

/* Says which values share a dotted name, by their exact names. */
static void name_the_ambiguous(const tool_names *l, const char *dotted) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->e[i].dotted, dotted) == 0) fprintf(stderr, "  %s\n", l->e[i].exact);
}

static int select_value(tstor_loaded *f, const char *select) {
  tool_names l;
  int rc = names_of(f, &l);
  if (rc) return rc;
  int ambiguous;
  const tool_name *e = tool_names_find(&l, select, &ambiguous);
  if (ambiguous) {
    tool_complain(
        "tstor convert: --select '%s' names more than one value; select one by its "
        "exact name:",
        select);
    name_the_ambiguous(&l, select);
    rc = EXIT_FAILED;
  } else if (!e) {
    tool_complain("tstor convert: no value named '%s' (tstor inspect lists the names)", select);
    rc = EXIT_FAILED;
  } else {
    tstor_checkpoint_set_root(f->ck, (tstor_value *)e->v);
  }
  tool_names_free(&l);
  return rc;
}

/* The tensors as one dict of their dotted names; two tensors with one name
 * are refused, naming both, rather than one silently dropped. */
static int flatten(tstor_loaded *f) {
  tool_names l;
  int rc = names_of(f, &l);
  if (rc) return rc;
  for (size_t i = 0; i < l.n; i++) {
    const tool_name *e = &l.e[i];
    if (e->ambiguous && !e->container && tstor_value_kind_of(e->v) == TSTOR_VALUE_TENSOR) {
      tool_complain("tstor convert: --flatten: two values are named '%s':", e->dotted);
      name_the_ambiguous(&l, e->dotted);
      fprintf(stderr, "  (--select one subtree, or convert without --flatten)\n");
      tool_names_free(&l);
      return EXIT_FAILED;
    }
  }
  tstor_value *root = NULL;
  int err = tstor_value_new(f->ck, TSTOR_VALUE_DICT, &root);
  for (size_t i = 0; i < l.n && !err; i++) {
    const tool_name *e = &l.e[i];
    tstor_value *name;
    if (e->container || tstor_value_kind_of(e->v) != TSTOR_VALUE_TENSOR) continue;
    if (!(err = tstor_value_new_string(f->ck, e->dotted, strlen(e->dotted), &name)))
      err = tstor_value_dict_set(root, name, (tstor_value *)e->v);
  }
  if (!err && l.nleaves > l.ntensors)
    fprintf(stderr,
            "tstor convert: --flatten keeps the %zu tensors and leaves out %zu other values\n",
            l.ntensors, l.nleaves - l.ntensors);
  if (!err) err = tstor_checkpoint_set_root(f->ck, root);
  if (err) tool_complain("tstor convert: --flatten: %s", tstor_last_error());
  tool_names_free(&l);
  return err ? EXIT_FAILED : 0;
}

static void print_help(void) {
  printf(
      "usage: tstor convert [--select NAME] [--flatten] [--copy] [--config FILE] IN OUT\n\n"
      "Converts between torch.save (.pt, either format), safetensors and Torch7\n"
      "(.t7) files. IN's format is told by its bytes; OUT's is safetensors when its\n"
      "name ends in .safetensors, Torch7 when it ends in .t7, torch.save otherwise.\n"
      "--select NAME writes only the value of that name, as tstor inspect names it\n"
      "(\"model\" of a training checkpoint, or an exact name such as ['a.b']);\n"
      "--flatten writes the tensors as one dict of their names\n"
      "(\"model.layer1.weight\"), what a safetensors file holds, and leaves the other\n"
      "values out; two tensors whose names are the same are refused. safetensors has\n"
      "no shared storage: tensors that share one are refused unless --copy writes\n"
      "each as its own copy.\n"
      "Exit status: 0, 1 for a file that cannot be read or written, 2 for bad usage.\n");
}

int tstor_cmd_convert(int argc, char **argv) {
  const char *config = NULL, *in = NULL, *out = NULL, *select = NULL;
  unsigned flags = 0;
  int flat = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      config = argv[++i];
    } else if (strcmp(argv[i], "--select") == 0 && i + 1 < argc) {
      select = argv[++i];
    } else if (strcmp(argv[i], "--flatten") == 0) {
      flat = 1;
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
  tstor_loaded f;
  int rc = tstor_load_for_command(config, in, 0, &f);
  if (rc) return rc;
  if (select) rc = select_value(&f, select);
  if (!rc && flat) rc = flatten(&f);
  if (!rc) {
    tstor_file_format to = ends_with(out, ".safetensors") ? TSTOR_FORMAT_SAFETENSORS
                           : ends_with(out, ".t7")        ? TSTOR_FORMAT_TORCH7
                                                          : TSTOR_FORMAT_TORCH;
    tstor_save_options opts = TSTOR_SAVE_OPTIONS_INIT;
    if (to == TSTOR_FORMAT_SAFETENSORS) opts.flags = flags; /* the one format that takes them */
    int err = tstor_checkpoint_save(f.ck, out, to, &opts);
    if (err) {
      /* most of the savers' messages name the file already */
      const char *why = tstor_last_error();
      int named = strncmp(why, out, strlen(out)) == 0 && why[strlen(out)] == ':';
      tool_complain("tstor convert: %s%s%s (%s)", named ? "" : out, named ? "" : ": ", why,
                    tstor_err_name(err));
      rc = EXIT_FAILED;
    }
  }
  tstor_unload_for_command(&f);
  return rc;
}
