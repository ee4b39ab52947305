"""Checks an `llmc-compile --emit report` page (argv[1], '-' for stdin)
against `--emit perf --json` of the same command (argv[2]):

- the page parses, its elements closed in order, with one html, head, body,
  title; it fetches nothing (no src/href/xlink:href/action to another
  place, no <link>, <iframe>, <img>, script src, CSS url() or @import);
- the kernel table has one row a kernel, in plan order, with the JSON's
  name, pass, path, engine and predicted time;
- each roofline (GMEM, L2) has one dot a kernel, titled with its name, placed
  in the order of its intensity (x) and achieved rate (y) as the checker
  computes them from the JSON's work and bytes;
- the plan's drawing has one box a kernel (kernelN titled, its name first),
  in frames labelled as --frames says; or, with --no-drawing, a note that
  names Graphviz's dot instead of a drawing;
- the groupings in the page's JSON add up: every kernel in the group of its
  pass, engine or path, the groups' times summing to the step's;
- with --measured FILE: each kernel's measured time is that file's launches
  summed (none where it has none) and the summary gives their total; without,
  no measured column;
- with --expect-text TEXT: TEXT is in the page's text, and never raw in its
  markup where it holds a character HTML would read.
Prints 'ok' and what it counted."""
import argparse
import html.parser
import json
import re
import sys

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
FETCHING = {"src", "href", "xlink:href", "action", "data", "poster", "srcset", "formaction"}


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children, self.text = tag, dict(attrs), parent, [], []

    def all(self, tag=None, cls=None):
        for c in self.children:
            if (tag is None or c.tag == tag) and (cls is None or cls in c.attrs.get("class", "").split()):
                yield c
            yield from c.all(tag, cls)

    def content(self):
        return "".join(self.text) + "".join(c.content() for c in self.children)


class Page(html.parser.HTMLParser):
    """The page as a tree; fails on an end tag that is not the open element's."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", [], None)
        self.open = self.root
        self.doctype = False
        self.errors = []
        self.fetches = []

    def handle_decl(self, decl):
        self.doctype = self.doctype or decl.lower() == "doctype html"

    def check_fetch(self, tag, attrs):
        for name, value in attrs:
            if name in FETCHING and value is not None and not value.startswith("#"):
                self.fetches.append(f"<{tag} {name}={value!r}>")
        if tag in ("link", "iframe", "img", "object", "embed") or (tag == "script" and dict(attrs).get("src")):
            self.fetches.append(f"<{tag}>")

    def handle_starttag(self, tag, attrs):
        self.check_fetch(tag, attrs)
        node = Node(tag, attrs, self.open)
        self.open.children.append(node)
        if tag not in VOID:
            self.open = node

    def handle_startendtag(self, tag, attrs):
        self.check_fetch(tag, attrs)
        self.open.children.append(Node(tag, attrs, self.open))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if self.open.tag != tag:
            self.errors.append(f"</{tag}> closes <{self.open.tag}>")
            return
        self.open = self.open.parent

    def handle_data(self, data):
        self.open.text.append(data)


def fail(message):
    sys.exit("check_report: " + message)


def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-30)


def flops(kernel):
    return sum(v for unit, v in kernel["work"].items() if unit.startswith("tensor") or unit in ("fp32", "fp32_contraction"))


def moved(kernel, level):
    return next(l["moved_bytes"] for l in kernel["levels"] if l["level"] == level)


def check_well_formed(page, raw):
    if page.errors:
        fail("the page does not nest: " + "; ".join(page.errors[:3]))
    if page.open is not page.root:
        fail(f"<{page.open.tag}> is never closed")
    if not page.doctype:
        fail("no <!DOCTYPE html>")
    for tag in ("html", "head", "body"):
        if len(list(page.root.all(tag))) != 1:
            fail(f"not one <{tag}>")
    if len(list(next(page.root.all("head")).all("title"))) != 1:
        fail("not one <title> in <head>")
    if page.fetches:
        fail("the page fetches: " + ", ".join(page.fetches[:3]))
    styles = "".join(s.content() for s in page.root.all("style"))
    if "@import" in styles or re.search(r"url\(\s*['\"]?(?!#)", styles):
        fail("the style sheet fetches")
    if re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", raw):
        fail("a src or href to another place in the markup")


def check_table(page, kernels, measured):
    table = next((t for t in page.root.all("table") if t.attrs.get("id") == "kernel-table"), None)
    if table is None:
        fail("no table#kernel-table")
    headings = [th.content().strip() for th in table.all("th")]
    rows = [tr for tr in table.all("tr") if "data-kernel" in tr.attrs]
    names = [k["name"] for k in kernels]
    shown = [[td.content().strip() for td in tr.all("td")][1] for tr in rows]
    if shown != names:
        fail(f"the table's kernels {shown} are not the JSON's {names}")
    column = {h: i for i, h in enumerate(headings)}
    if ("measured us" in column) != (measured is not None):
        fail("a measured column without --measured, or none with it")
    for tr, k in zip(rows, kernels):
        cells = list(tr.all("td"))
        for heading, key in (("pass", "pass"), ("path", "path"), ("engine", "engine")):
            if cells[column[heading]].content().strip() != k[key]:
                fail(f"{k['name']}: {heading} {cells[column[heading]].content()!r}, not {k[key]!r}")
        if not close(float(cells[column["predicted us"]].attrs["data-v"]), k["predicted_seconds"]):
            fail(f"{k['name']}: predicted time is not the JSON's")
        if measured is not None:
            cell = cells[column["measured us"]]
            want = measured.get(int(k["name"].split("_")[0][1:]))
            if want is None:
                if cell.attrs["data-v"] != "" or cell.content() != "-":
                    fail(f"{k['name']}: a measured time where the file has none")
            elif cell.attrs["data-v"] == "" or not close(float(cell.attrs["data-v"]), want) \
                    or cell.content() != f"{want * 1e6:.2f}":
                fail(f"{k['name']}: measured {cell.attrs['data-v']} ({cell.content()}), the file {want}")
            elif "measured_seconds" in k and not close(k["measured_seconds"], want):
                fail(f"{k['name']}: the perf JSON measured {k['measured_seconds']}, the file {want}")
    return len(rows)


def check_roofline(svg, kernels, measured):
    level = svg.attrs.get("data-level")
    dots = list(svg.all("circle", "dot"))
    if [d.attrs.get("data-kernel") for d in dots] != [k["name"] for k in kernels]:
        fail(f"the {level} roofline's dots are not one a kernel in plan order")
    places = []
    for d, k in zip(dots, kernels):
        title = "".join(t.content() for t in d.all("title"))
        if not title.startswith(k["name"] + " "):
            fail(f"the {level} dot of {k['name']} is titled {title!r}")
        f, b = flops(k), moved(k, level)
        seconds = (measured or {}).get(int(k["name"].split("_")[0][1:]), k["predicted_seconds"])
        if f > 0 and b > 0:
            places.append((f / b, f / seconds, float(d.attrs["cx"]), float(d.attrs["cy"]), k["name"]))
    if len(places) < 2:
        fail(f"the {level} roofline has fewer than two kernels on the scale")
    for x1, y1, cx1, cy1, n1 in places:
        for x2, y2, cx2, cy2, n2 in places:
            if x1 < x2 * (1 - 1e-6) and not cx1 <= cx2 + 0.1:
                fail(f"{level}: {n1} (intensity {x1:.3g}) is drawn right of {n2} ({x2:.3g})")
            if y1 < y2 * (1 - 1e-6) and not cy1 >= cy2 - 0.1:  # SVG's y grows downwards
                fail(f"{level}: {n1} ({y1:.3g} FLOP/s) is drawn above {n2} ({y2:.3g})")
    return len(dots)


def check_drawing(page, kernels, args):
    section = next((s for s in page.root.all("section") if s.attrs.get("id") == "plan"), None)
    if section is None:
        fail("no section#plan")
    svgs = list(section.all("svg"))
    if args.no_drawing:
        note = next((p for p in section.all("p") if p.attrs.get("id") == "drawing-missing"), None)
        if svgs or note is None or "dot" not in note.content():
            fail("without dot: a drawing, or no note naming dot")
        return "no drawing (dot missing)"
    if len(svgs) != 1:
        fail(f"{len(svgs)} drawings in section#plan")
    boxes = {}
    for g in svgs[0].all("g", "node"):
        title = "".join(t.content() for t in g.all("title"))
        texts = [t.content() for t in g.all("text")]
        if re.fullmatch(r"kernel\d+", title) and texts:
            boxes[int(title[6:])] = texts[0]
    if boxes != {i: k["name"] for i, k in enumerate(kernels)}:
        fail(f"the drawing's boxes {boxes} are not the kernels")
    frames = sorted({"".join(t.content() for t in g.all("text")) for g in svgs[0].all("g", "cluster")})
    if args.frames is not None and frames != sorted(args.frames.split(",")):
        fail(f"the drawing's frames are {frames}, not {args.frames}")
    return f"{len(boxes)} boxes in {len(frames)} frames"


def group_key(kernel, grouping):
    if grouping == "pass":
        return kernel["pass"] or "(none)"
    if grouping == "kind":
        return kernel["engine"] or "(none)"
    calls = kernel["path"].split("/") if kernel["path"] else []
    if grouping != "path":
        calls = calls[: int(grouping[5:])]
    return "/".join(calls) or "(the diagram itself)"


def check_groupings(page, kernels, measured):
    script = next((s for s in page.root.all("script") if s.attrs.get("id") == "report-data"), None)
    if script is None:
        fail("no script#report-data")
    data = json.loads(script.content())
    total = sum(k["predicted_seconds"] for k in kernels)
    if not close(data["predicted"], total):
        fail(f"the page's step {data['predicted']}, the JSON's {total}")
    names = [g["name"] for g in data["groupings"]]
    if names[:2] != ["pass", "kind"] or names[-1] != "path":
        fail(f"groupings {names}")
    for g in data["groupings"]:
        sums = [0.0] * len(g["groups"])
        for k, index in zip(kernels, g["keys"]):
            if g["groups"][index]["key"] != group_key(k, g["name"]):
                fail(f"{g['name']}: {k['name']} in {g['groups'][index]['key']!r}, not {group_key(k, g['name'])!r}")
            sums[index] += k["predicted_seconds"]
        if len(g["keys"]) != len(kernels) or sum(x["kernels"] for x in g["groups"]) != len(kernels):
            fail(f"{g['name']}: not every kernel in one group")
        if not all(close(s, x["predicted"]) for s, x in zip(sums, g["groups"])):
            fail(f"{g['name']}: a group's time is not its kernels'")
        if measured is not None and not close(sum(x["measured"] for x in g["groups"]), sum(measured.values())):
            fail(f"{g['name']}: the groups' measured times do not add up to the file's")
    return len(names)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("page")
    parser.add_argument("perf")
    parser.add_argument("--measured")
    parser.add_argument("--no-drawing", action="store_true")
    parser.add_argument("--frames")
    parser.add_argument("--expect-text")
    args = parser.parse_args()
    raw = sys.stdin.read() if args.page == "-" else open(args.page, encoding="utf-8").read()
    kernels = json.load(open(args.perf))["kernels"]
    measured = None
    if args.measured:
        measured = {}
        for launch in json.load(open(args.measured)):
            measured[launch["kernel"]] = measured.get(launch["kernel"], 0) + launch["measured_us"] * 1e-6
    page = Page()
    page.feed(raw)
    page.close()
    check_well_formed(page, raw)
    rows = check_table(page, kernels, measured)
    rooflines = list(page.root.all("svg", "roofline"))
    if sorted(s.attrs.get("data-level") for s in rooflines) != ["GMEM", "L2"]:
        fail("not one roofline for GMEM and one for L2")
    dots = [check_roofline(s, kernels, measured) for s in rooflines]
    drawing = check_drawing(page, kernels, args)
    groupings = check_groupings(page, kernels, measured)
    text = page.root.content()
    if measured is not None:
        summary = f"{sum(measured.values()) * 1e3:.3f} ms measured"
        if summary not in text:
            fail(f"the summary does not say {summary!r}")
    if args.expect_text is not None:
        if args.expect_text not in text:
            fail(f"{args.expect_text!r} is not in the page's text")
        if re.search(r"[<>&\"]", args.expect_text) and args.expect_text in raw:
            fail(f"{args.expect_text!r} is in the markup unescaped")
    print(f"ok: {rows} kernels in the table, {dots[0]} and {dots[1]} dots, {drawing}, {groupings} groupings"
          + (f", {len(measured)} measured" if measured is not None else ""))


main()
