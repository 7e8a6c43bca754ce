"""verdicts.py: tests/hf_sweep/expected.tsv, each listed family's expected
verdict in the sweep (sweep.py compares each run with it and writes it with
--update; family_table.py writes docs/FAMILIES.md's table from it).  The
standard library only (family_table.py runs without the venv).

expected.tsv: "#" lines, one of them "# transformers X.Y.Z" (families.json's
release), then one line per family, sorted: model_type, verdict (runs,
refused or no model) and, but for runs, the gist of why (the CLI's message,
or why transformers could not build the tiny model), tab-separated.
"""
import os
import re

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected.tsv")
VERDICTS = ("runs", "refused", "no model")
GIST_CHARS = 200
HEADER = ("# tests/hf_sweep/expected.tsv: each listed family's verdict in the sweep (sweep.py;\n"
          "# `sweep.py ... --update` writes it): model_type, verdict, why (but for runs)\n")


def gist(status, detail):
    """The recorded reason of a verdict: "" for runs, else the detail on one
    line, cut to GIST_CHARS."""
    if status == "runs":
        return ""
    return re.sub(r"\s+", " ", str(detail)).strip()[:GIST_CHARS]


def read(path=PATH):
    """(transformers version or None, {model_type: (verdict, gist)})."""
    version, expected = None, {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if line.startswith("# transformers "):
                version = line.split()[2]
            if not line or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 3 or fields[1] not in VERDICTS:
                raise ValueError(f"{path}:{number}: expected model_type, verdict "
                                 f"({', '.join(VERDICTS)}), why; got {line!r}")
            expected[fields[0]] = (fields[1], fields[2])
    return version, expected


def write(version, expected, path=PATH):
    """Writes {model_type: (verdict, gist)}, sorted."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(HEADER + f"# transformers {version}\n")
        for model_type in sorted(expected):
            verdict, why = expected[model_type]
            f.write(f"{model_type}\t{verdict}\t{why}\n")


def differences(expected, got, listed=None):
    """A line per family whose verdict (or its gist) in got differs from
    expected; listed (the sweep was over the whole list): its model types,
    and a family expected but not listed differs too."""
    lines = []
    for model_type, (verdict, why) in sorted(got.items()):
        if model_type not in expected:
            lines.append(f"{model_type}: new in the list, {verdict}"
                         + (f" ({why})" if why else "") + ": not in expected.tsv")
        elif expected[model_type] != (verdict, why):
            old_verdict, old_why = expected[model_type]
            lines.append(f"{model_type}: {verdict}" + (f" ({why})" if why else "")
                         + f", expected {old_verdict}" + (f" ({old_why})" if old_why else ""))
    if listed is not None:
        lines += [f"{t}: in expected.tsv, no more in the list" for t in sorted(expected)
                  if t not in listed]
    return lines
