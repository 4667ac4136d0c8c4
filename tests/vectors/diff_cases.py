#!/usr/bin/python3
"""Compares two versions of a golden file case by case, for compare-torch2.sh.

    python3 tests/vectors/diff_cases.py [-n N | -a] OLD NEW

OLD and NEW are the same file made by two PyTorch versions (tensor_views.txt,
tensor_chains.txt, tensor_copies.txt, shapes.txt: one case a line; print.txt,
tensor_print.txt: blocks ending in "end"; networks.txt: a case a call, within
its network). The first line, naming the version,
is left out. Cases are paired by their question (the line up to its result, or
a block's first two lines; a chain by its place, as gen_chains.py --replay
walks them again); each pair whose answers differ counts once, by
kind:

    message  both refuse, with other words
    refusal  OLD refuses and NEW answers, or the other way round
    result   both answer, differently
    only     a case one file has and the other lacks

It prints "FILE: C cases, D differ (kind K, ...)" and the first N differences
(-n, 3 by default); -a: every one, then a line per kind and operation.
"""
import sys


def cases(path):
    """(question, answer) pairs of the file, in order."""
    with open(path) as fh:
        text = fh.read().split("\n")[1:]
    out = []
    if path.endswith("print.txt"):
        block = []
        for line in text:
            block.append(line)
            if line == "end":
                out.append(("\n".join(block[:2]), "\n".join(block[2:-1])))
                block = []
        return out
    if path.endswith("chains.txt"):  # paired by place: a chain may end sooner
        lines = [line for line in text if line and not line.startswith("#")]
        return [("%d: %s" % (n + 1, line.split(" ; ")[0]), line.split(" ; ", 1)[1])
                for n, line in enumerate(lines)]
    if path.endswith("networks.txt"):  # "NET: %N = OP ARGS" => its layouts
        net = ""
        for line in text:
            if line.startswith("net "):
                net = line[4:]
            elif " => " in line:
                q, _, a = line.partition(" => ")
                out.append(("%s: %s" % (net, q), a))
        return out
    sep = " => " if path.endswith("shapes.txt") else " ; "
    for line in text:
        if line and not line.startswith("#"):
            q, _, a = line.rpartition(sep)
            out.append((q, a))
    return out


def refused(answer):
    last = answer.rsplit(" ; ", 1)[-1]
    return last.startswith("!") or last.startswith("error")


def kind(old, new):
    if old is None or new is None:
        return "only"
    if refused(old) and refused(new):
        return "message"
    if refused(old) or refused(new):
        return "refusal"
    return "result"


def operation(question, answer):
    """The operation a case asks about: the first word of a shape case, the
    last step of a view or a chain, the dtype of a printed block."""
    if " = " in question:
        return question.split(": ")[0] + " " + question.split(" = ")[1].split(" ")[0]
    if question[0].isdigit():
        return answer.split(" ; ")[-2].split(" ")[0]
    if " ; " in question:
        return question.split(" ; ")[-1].split(" ")[0]
    return question.split(" ")[0] if "\n" not in question else question.split("\n")[0]


def main():
    args = sys.argv[1:]
    first, every = 3, False
    if args[0] == "-a":
        every, args = True, args[1:]
    elif args[0] == "-n":
        first, args = int(args[1]), args[2:]
    old, new = cases(args[0]), cases(args[1])
    answers = {}
    for q, a in new:
        answers.setdefault(q, []).append(a)
    diffs = []
    for q, a in old:
        got = answers.get(q)
        b = got.pop(0) if got else None
        if b != a:
            diffs.append((kind(a, b), q, a, b))
    for q, rest in answers.items():
        for b in rest:
            diffs.append(("only", q, None, b))
    kinds = {}
    ops = {}
    for k, q, a, b in diffs:
        kinds[k] = kinds.get(k, 0) + 1
        op = operation(q, a if a is not None else b)
        ops[(k, op)] = ops.get((k, op), 0) + 1
    name = args[0].rsplit("/", 1)[-1]
    print("%s: %d cases, %d differ%s" % (name, len(old), len(diffs),
                                         " (" + ", ".join("%s %d" % kv for kv in sorted(kinds.items())) + ")"
                                         if diffs else ""))
    for k, q, a, b in diffs if every else diffs[:first]:
        print("  [%s] %s\n    1.13: %s\n    2.x:  %s" % (k, q.replace("\n", " | "),
                                                      "(none)" if a is None else a.replace("\n", " | "),
                                                      "(none)" if b is None else b.replace("\n", " | ")))
    for (k, op), n in sorted(ops.items()) if every else ():
        print("  by kind: %s %s %d" % (k, op.replace("\n", " "), n))


if __name__ == "__main__":
    main()
