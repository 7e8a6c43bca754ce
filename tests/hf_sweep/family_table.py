#!/usr/bin/env python3
"""family_table.py: docs/FAMILIES.md's table of every family, and the
README's two lines on them, written from the library's own table
(`ropeattn families`), transformers' list (tests/hf_sweep/families.json,
list_families.py) and the sweep's expected verdicts
(tests/hf_sweep/expected.tsv, verdicts.py); or checked against them.

    python3 tests/hf_sweep/family_table.py CLI --write   (make families-doc)
    python3 tests/hf_sweep/family_table.py CLI --check   (make test: tests/test_family_table.sh)

--check exits 1 naming each family whose row differs (or the README's
lines), and each family the sweep expects to run although the library's
table refuses it or lacks it.  The standard library only: it runs without
the transformers venv.
"""
import json
import os
import re
import subprocess
import sys
import textwrap

import verdicts

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DOCS = os.path.join(ROOT, "docs", "FAMILIES.md")
README = os.path.join(ROOT, "README.md")
LISTED = os.path.join(ROOT, "tests", "hf_sweep", "families.json")
BEGIN = "<!-- the family table: written by tests/hf_sweep/family_table.py (make families-doc) -->"
END = "<!-- end of the family table -->"
README_START = "- **Run:**"  # the README's lines: from this one to the next blank line
NO_MODEL_CHARS = 100


def library_table(cli):
    """{model_type: (layout, "" or why refused)} from `ropeattn families`."""
    out = subprocess.run([cli, "families"], capture_output=True, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        model_type, layout, verdict = line.split("\t")
        table[model_type] = (layout, verdict[len("refused: "):] if verdict != "runs" else "")
    return table


def is_set(found):
    """Whether a feature list_families.py found is on: a config group
    ({key: value}) with a value neither null nor false, or any other
    value but None."""
    if isinstance(found, dict):
        return any(v not in (None, False) for v in found.values())
    return found not in (None, False)


def needs(entry):
    """What list_families.py found the family's attention has, in words."""
    if "error" in entry:
        return "(its config class needs arguments)"
    found = ["interleaved"] if entry.get("layout") == "interleaved" else []
    rope = entry.get("rope_type", "default")
    if isinstance(rope, dict):
        found.append("rope per layer type")
    elif rope != "default":
        found.append(f"{rope} rope")
    if is_set(entry.get("partial_rotary")):
        found.append("partial rotary")
    for norm in entry.get("qk_norm", []):
        found.append("q/k norm" + (" over the projection" if norm["scope"] == "whole" else "")
                     + (" after RoPE" if norm["where"] == "after_rope" else ""))
    if "fused_qkv" in entry:
        found.append("fused " + "/".join(entry["fused_qkv"]))
    kinds = [k for k in entry.get("window", {}).get("layer_types") or [] if k != "full_attention"]
    if kinds:
        found.append("layers: " + "/".join(kinds))
    elif entry.get("window", {}).get("sliding_window") is not None:
        found.append("sliding window")
    words = {"rope_if": "RoPE on some layers", "softcap": "softcap",
             "chunks": "chunked attention", "mla": "latent attention", "sinks": "sinks",
             "kv_sharing": "KV sharing", "indexed_attention": "sparse indexed attention",
             "norm_before_o_proj": "norm before o_proj", "nope": "NoPE layers"}
    found += [w for key, w in words.items() if is_set(entry.get(key))]
    if "output_gate" in entry:
        found.append(f"output gate from {entry['output_gate']}")
    if "hybrid_layers" in entry:
        found.append("beside " + "/".join(entry["hybrid_layers"]))
    found += sorted(k for k, v in entry.get("bias", {}).items() if v is True)
    found += sorted(k for k, v in entry.get("scaling", {}).items() if v not in (None, False))
    return ", ".join(found) or "Llama's"


def text_type(model_type, listed):
    """The model_type ropeattn reads a listed family's config by: its
    text_config's (a composite model's), else its own."""
    return listed.get(model_type, {}).get("text_config", model_type)


def cell(text):
    return str(text).replace("|", "/")


def rows(library, listed, expected):
    """{model_type: its table row}, every family of the library's table and
    transformers' list."""
    out = {}
    for model_type in sorted(set(library) | set(listed)):
        read_as = text_type(model_type, listed)
        layout, why = library.get(read_as, (None, None))
        ours = ("not in the table" if layout is None else f"refused: {why}" if why else "runs")
        if read_as != model_type:
            ours += f" (its text_config, {read_as})"
        if model_type in listed:
            verdict, gist = expected.get(model_type, ("not swept yet", ""))
            if verdict == "no model":
                verdict += f": {gist[:NO_MODEL_CHARS]}"
            elif verdict == "refused" and ours == "runs":
                verdict += f": {gist}"
            theirs = needs(listed[model_type])
        else:
            verdict, theirs = "", "not listed (remote code, or not a causal LM)"
        out[model_type] = (f"| {model_type} | {cell(ours)} | {cell(verdict)} | {cell(theirs)} |")
    return out


def table(version, by_type):
    head = [BEGIN, "",
            f"| family (`model_type`) | ropeattn's table (`ropeattn families`) | the sweep on "
            f"transformers {version} (tests/hf_sweep) | its attention (list_families.py) |",
            "|---|---|---|---|"]
    return "\n".join(head + list(by_type.values()) + ["", END])


def readme_lines(library, listed, expected, version):
    """The README's lines on the families: how many run and are refused."""
    counts = {v: sum(1 for t in listed if expected.get(t, ("",))[0] == v) for v in verdicts.VERDICTS}
    others = [t for t in library if t not in listed]
    n = len(listed)
    run = (f"- **Run:** {counts['runs']} of the {n} RoPE families transformers {version} lists "
           f"({100 * counts['runs'] // max(n, 1)}%; each checked through transformers layer by "
           f"layer: forward, cache, gradients), and {sum(not library[t][1] for t in others)} "
           f"more of ropeattn's table (remote code such as chatglm, multimodal models).")
    refused = (f"- **Refused, naming why:** {counts['refused']} listed families, and "
               f"{sum(bool(library[t][1]) for t in others)} more of ropeattn's table (each "
               f"in docs/FAMILIES.md); ALiBi, any key or tensor changing attention that the "
               f"family does not run ({counts['no model']} listed families whose tiny model "
               f"the sweep cannot build).")
    return [line for part in (run, refused)
            for line in textwrap.wrap(part, 76, subsequent_indent="  ")]


def block(text, begin, end):
    """(start, stop) of the lines from begin's line to end's line (both in)."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(begin))
    stop = next(i for i in range(start, len(lines)) if lines[i] == end) if end else None
    return start, stop


def readme_block(text):
    """(start, stop) of the README's family lines: from "- **Run:**" to
    the line before the next blank one."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(README_START))
    stop = next(i for i in range(start, len(lines)) if not lines[i].strip()) - 1
    return start, stop


def replaced(text, span, new_lines):
    lines = text.split("\n")
    return "\n".join(lines[:span[0]] + new_lines + lines[span[1] + 1:])


def check_verdicts(library, listed, expected):
    """A line per family the sweep expects to run that the library refuses
    or lacks."""
    lines = []
    for model_type, (verdict, _) in sorted(expected.items()):
        read_as = text_type(model_type, listed)
        if verdict == "runs" and read_as not in library:
            lines.append(f"{model_type}: expected.tsv says it runs, and ropeattn's table lacks "
                         f"{read_as}")
        elif verdict == "runs" and library[read_as][1]:
            lines.append(f"{model_type}: expected.tsv says it runs, and ropeattn's table refuses "
                         f"{read_as} ({library[read_as][1]})")
    return lines


def differing_rows(docs_text, by_type):
    """A line per family whose row in the docs differs from by_type's."""
    span = block(docs_text, BEGIN, END)
    have = {}
    for line in docs_text.split("\n")[span[0]:span[1]]:
        m = re.match(r"\| (\S+) \|", line)
        if m and not line.startswith("| family"):
            have[m.group(1)] = line
    lines = []
    for model_type in sorted(set(have) | set(by_type)):
        if model_type not in have:
            lines.append(f"{model_type}: missing; its row: {by_type[model_type]}")
        elif model_type not in by_type:
            lines.append(f"{model_type}: in the docs, in neither ropeattn's table nor the list")
        elif have[model_type] != by_type[model_type]:
            lines.append(f"{model_type}: the docs say\n    {have[model_type]}\n  it is\n"
                         f"    {by_type[model_type]}")
    return lines


def main(argv):
    if len(argv) != 3 or argv[2] not in ("--write", "--check"):
        sys.exit(__doc__)
    library = library_table(argv[1])
    with open(LISTED, encoding="utf-8") as f:
        data = json.load(f)
    listed = {e["model_type"]: e for e in data["families"]}
    version = data["transformers"]
    expected = verdicts.read()[1]
    by_type = rows(library, listed, expected)
    new_table = table(version, by_type).split("\n")
    new_readme = readme_lines(library, listed, expected, version)
    with open(DOCS, encoding="utf-8") as f:
        docs_text = f.read()
    with open(README, encoding="utf-8") as f:
        readme_text = f.read()
    if argv[2] == "--write":
        with open(DOCS, "w", encoding="utf-8") as f:
            f.write(replaced(docs_text, block(docs_text, BEGIN, END), new_table))
        with open(README, "w", encoding="utf-8") as f:
            f.write(replaced(readme_text, readme_block(readme_text), new_readme))
        return
    problems = [f"docs/FAMILIES.md: family {line}" for line in differing_rows(docs_text, by_type)]
    span = block(docs_text, BEGIN, END)
    if not problems and docs_text.split("\n")[span[0]:span[1] + 1] != new_table:
        problems.append("docs/FAMILIES.md: the family table's head differs")
    start, stop = readme_block(readme_text)
    if readme_text.split("\n")[start:stop + 1] != new_readme:
        problems.append("README.md: the lines on the families differ; they are\n"
                        + "\n".join("    " + line for line in new_readme))
    problems += [f"tests/hf_sweep/expected.tsv: {line}"
                 for line in check_verdicts(library, listed, expected)]
    if problems:
        print("\n".join(problems))
        print(f"family_table: {len(problems)} differences from ropeattn's table, "
              "tests/hf_sweep/families.json and expected.tsv: `make families-doc` rewrites the "
              "docs (after `make hf-sweep` has updated expected.tsv where verdicts changed)")
        sys.exit(1)
    print(f"family_table: docs/FAMILIES.md and README.md agree with ropeattn's table "
          f"({len(library)} families), the list ({len(listed)}) and the expected verdicts")


if __name__ == "__main__":
    main(sys.argv)
