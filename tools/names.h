/* The names tstor inspect gives the values of a checkpoint's tree, which
 * tstor convert's --select and --flatten take. Each value has two:
 *
 *   dotted  model.layer1.weight    dict string keys joined with '.', [i] for
 *                                  list and tuple items, [KEY] for other keys,
 *                                  NAME@ for an OrderedDict's attributes: what
 *                                  people write, and what safetensors files
 *                                  hold; two values may share one ({"a.b": x}
 *                                  and {"a": {"b": y}}).
 *   exact   ['model']['layer1.weight']
 *                                  every key as a Python subscript, strings
 *                                  quoted and escaped: never shared.
 *
 * The walk is bounded by the bytes of the names it builds, not by the file's
 * structure: a small file nesting long keys deep can name a tensor a million
 * times over paths of megabytes (each container is walked once, but a tensor
 * is named under every path to it). Past the budget the walk stops and says
 * so in `cut`. */
#ifndef TSTOR_TOOLS_NAMES_H
#define TSTOR_TOOLS_NAMES_H

#include <stddef.h>
#include <tstor/serialize.h>

typedef struct tool_name {
  char *dotted, *exact;
  const tstor_value *v;
  int container; /* a dict, list or tuple with items, named for --select only;
                    an empty one is a value of its own, listed */
  int ambiguous; /* another value has the same dotted name */
} tool_name;

typedef struct tool_names {
  tool_name *e; /* in tree order */
  size_t n, cap;
  size_t nleaves, ntensors; /* entries that are not containers; tensors among them */
  size_t bytes, budget;     /* of names built so far, and the most that may be */
  int cut;                  /* 1: the walk stopped at the budget */
  int failed;               /* 1: out of memory */
  const void **seen;        /* containers walked: open addressing */
  size_t seen_cap, nseen;
} tool_names;

/* The names of every value under root, with `budget` bytes of names at most,
 * and which dotted names are ambiguous. Check failed, then cut. */
void tool_names_collect(tool_names *l, const tstor_value *root, size_t budget);
void tool_names_free(tool_names *l);

/* The entry named `name`, dotted or exact; NULL when none. A dotted name
 * shared by two values is answered with NULL and *ambiguous set, so that the
 * caller can ask for the exact one. */
const tool_name *tool_names_find(const tool_names *l, const char *name, int *ambiguous);

/* The budget for a file of `file_bytes`: 64 MiB, or 16 bytes of names for
 * each byte of the file when that is more, so that a large model is never
 * cut and a small hostile file cannot cost gigabytes. */
size_t tool_names_budget(size_t file_bytes);

#endif
