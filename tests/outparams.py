#!/usr/bin/env python3
"""Writes test_outparams.c: every public function of the installed headers
that hands back an object through a pointer-to-pointer parameter is called
so that it fails, and must leave that parameter NULL (tstor.h's convention:
"a failed call leaves *out NULL"; a caller that released what a failed call
left there released it twice).

    outparams.py HEADER_DIR > test_outparams.c

The list comes from the headers at build time, so that a new function cannot
escape it. Each function is called twice, with every output parameter set to
a sentinel first:
  - "null": every pointer argument NULL, numbers 0, descriptors -1;
  - "bad": real objects (a context, a 2x3 float tensor, a 16-byte storage, a
    new checkpoint) where the function takes them, and invalid numbers,
    dtypes, devices and names around them, so that the call fails after its
    NULL checks.
A call that succeeds anyway (a NULL context is the default one) releases
what it got, by the type's release function; a type this script has no
release for makes the generated test fail to compile, so that a new kind of
output is thought about.
"""
import glob
import os
import re
import sys

RELEASE = {  # owned output type -> how the test releases one
    "tstor_context": "tstor_context_close({})",
    "tstor_storage": "tstor_storage_release({})",
    "tstor_tensor": "tstor_tensor_release({})",
    "tstor_checkpoint": "tstor_checkpoint_free({})",
    "tstor_stream": "tstor_stream_free({})",
    "tstor_event": "tstor_event_free({})",
    "char": "free({})",
    "void": "free({})",
    "DLManagedTensor": "{0}->deleter({0})",
    "DLManagedTensorVersioned": "{0}->deleter({0})",
}
# outputs that are borrowed, not owned: never released
BORROWED = {("tstor_checkpoint_storage", "storage"), ("tstor_storage_data_checked", "out")}
BORROWED_TYPES = {"tstor_value"}


def declarations(path):
    text = open(path).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    for m in re.finditer(r"TSTOR_EXTERN\s+([^;{}]*?)\s*\(([^;{}]*?)\)\s*;", text, re.S):
        head = " ".join(m.group(1).split())
        name = re.search(r"(\w+)$", head).group(1)
        ret = head[: -len(name)].strip()
        params = m.group(2).strip()
        plist = [] if params in ("", "void") else [" ".join(p.split()) for p in params.split(",")]
        yield ret, name, plist


def split_param(p):
    m = re.match(r"(.*?)(\w+)\s*\[\w*\]$", p)  # an array parameter is a pointer
    if m:
        return m.group(1).strip() + " *", m.group(2)
    m = re.match(r"(.*?)(\w+)$", p)
    return m.group(1).strip(), m.group(2)


def out_param(ptype):
    """The pointed-to base type of an output (T ** or T ***), or None."""
    if ptype.startswith("const char"):
        return None
    m = re.match(r"^(\w+)\s*(\*\s*){2,3}$", ptype)
    return m.group(1) if m else None


def argument(fn, ptype, pname, variant):
    """A C expression for one input argument in the given variant."""
    base = ptype.replace("const", "").replace("*", "").strip()
    if pname in ("fd", "sock"):
        return "-1"
    if ptype.endswith("*"):
        if variant == "null":
            return "NULL"
        if base == "tstor_context":
            return "ctx"
        if base == "tstor_tensor" and ptype.count("*") == 1:
            return "tensor"
        if base == "tstor_storage" and ptype.count("*") == 1:
            return "storage"
        if base == "tstor_checkpoint":
            return "ck"
        if base == "char" and ptype.count("*") == 1:
            return '"no such \\001thing"'
        if base in ("int", "size_t") and pname in ("count", "size"):
            return "&count_out" if base == "int" else "&size_out"
        return "NULL"
    if base == "tstor_device":
        return "cpu" if variant == "bad" else "zero_device"
    if base == "tstor_dtype":
        return "(tstor_dtype)999" if variant == "bad" else "(tstor_dtype)0"
    if base == "double":
        return "-1.0" if variant == "bad" else "0.0"
    if base in ("tstor_deleter",):
        return "NULL"
    if base.startswith("tstor_") or base in ("DLDevice",):  # enums
        return "(%s)%s" % (base, "12345" if variant == "bad" else "0")
    if variant == "bad" and base == "size_t" and pname == "len":
        return "3"  # the length of a string given: within the one passed, a caller's promise
    return "-1" if variant == "bad" else "0"


def main():
    hdir = sys.argv[1]
    fns = []
    for h in sorted(glob.glob(os.path.join(hdir, "*.h"))):
        if os.path.basename(h) == "backend.h":  # the module ABI, called by the core only
            continue
        for ret, name, params in declarations(h):
            if ret != "int":
                continue
            outs = [(i, out_param(split_param(p)[0])) for i, p in enumerate(params)]
            outs = [(i, t) for i, t in outs if t]
            if outs:
                fns.append((os.path.basename(h), name, params, outs))
    w = sys.stdout.write
    w("/* Generated by tests/outparams.py from the public headers: do not edit. */\n")
    w("#define _GNU_SOURCE\n#include \"testutil.h\"\n\n#include <stdint.h>\n\n")
    for h in sorted({f[0] for f in fns}):
        w("#include <tstor/%s>\n" % h)
    w("\n#define SENTINEL ((void *)(uintptr_t)0x5e7)\n\n")
    w("static tstor_context *ctx;\nstatic tstor_device cpu, zero_device;\nstatic tstor_tensor *tensor;\n")
    w("static tstor_storage *storage;\nstatic tstor_checkpoint *ck;\nstatic int count_out;\nstatic size_t size_out;\n")
    w("static int checked, failed_calls, left_set;\n\n")
    for header, name, params, outs in fns:
        for variant in ("null", "bad"):
            w("static void %s_%s(void) {\n" % (name, variant))
            args = []
            for i, p in enumerate(params):
                ptype, pname = split_param(p)
                out = dict(outs).get(i)
                if out:
                    stars = ptype.count("*") - 1
                    w("  %s %s*o%d = SENTINEL;\n" % (out, "*" * (stars - 1) if stars > 1 else "", i))
                    args.append("&o%d" % i)
                else:
                    args.append(argument(name, ptype, pname, variant))
            w("  int rc = %s(%s);\n" % (name, ", ".join(args)))
            w("  checked++;\n  if (rc) {\n    failed_calls++;\n")
            for i, out in outs:
                w("    if (o%d != NULL) {\n      fprintf(stderr, \"%s (%s arguments) failed with %%s and left its "
                  "output parameter %d set\\n\", tstor_err_name(rc));\n      left_set++;\n    }\n"
                  % (i, name, variant, i))
            w("    return;\n  }\n")
            for i, out in outs:
                ptype = split_param(params[i])[0]
                pname = split_param(params[i])[1]
                if (name, pname) in BORROWED or out in BORROWED_TYPES:
                    continue
                if ptype.count("*") == 3:  # a list of tensors
                    w("  tstor_tensor_list_free(o%d, count_out);\n" % i)
                    continue
                w("  if (o%d) %s;\n" % (i, RELEASE[out].format("o%d" % i)))
            w("}\n\n")
    w("START_TEST(every_failed_call_leaves_its_output_null) {\n")
    w("  ck_tstor_ok(tstor_context_open(NULL, &ctx));\n")
    w("  ck_tstor_ok(tstor_device_parse(ctx, \"cpu\", &cpu));\n  memset(&zero_device, 0, sizeof zero_device);\n")
    w("  int64_t sizes[2] = {2, 3};\n")
    w("  ck_tstor_ok(tstor_tensor_zeros(ctx, cpu, TSTOR_FLOAT32, 2, sizes, &tensor));\n")
    w("  ck_tstor_ok(tstor_storage_new(ctx, cpu, 16, &storage));\n  ck_tstor_ok(tstor_checkpoint_new(&ck));\n")
    for header, name, params, outs in fns:
        w("  %s_null();\n  %s_bad();\n" % (name, name))
    w("  printf(\"%%d calls of %d functions, %%d failed, each leaving its output NULL\\n\", checked, "
      "failed_calls);\n" % len(fns))
    w("  ck_assert_int_gt(failed_calls, %d);\n" % len(fns))
    w("  ck_assert_msg(left_set == 0, \"%d failed calls left their output set (listed above)\", left_set);\n")
    w("  tstor_checkpoint_free(ck);\n  tstor_storage_release(storage);\n  tstor_tensor_release(tensor);\n")
    w("  tstor_context_close(ctx);\n}\nEND_TEST\n\n")
    w("int main(void) {\n  Suite *s = suite_create(\"outparams\");\n  TCase *tc = tcase_create(\"outparams\");\n")
    w("  tcase_add_test(tc, every_failed_call_leaves_its_output_null);\n  suite_add_tcase(s, tc);\n")
    w("  return tstor_test_run(s);\n}\n")


if __name__ == "__main__":
    main()
