#!/usr/bin/env python3
"""Checks that an SVG file lab.plot wrote is a self-contained picture:
well-formed XML with an <svg> root, no scripts, no event handlers, no links or references to
other files (href, url(), @import, <image>, <foreignObject>), text as <text>, and the given
number of <path> elements with the given number of points each (M and L commands).
    check_svg.py FILE PATHS [POINTS_OF_PATH_1 ...]
Prints what is wrong and exits 1, or exits 0 silently."""
import re
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def main():
    path, want_paths = sys.argv[1], int(sys.argv[2])
    want_points = [int(x) for x in sys.argv[3:]]
    problems = []
    root = ET.parse(path).getroot()  # raises on malformed XML
    if root.tag != NS + "svg":
        problems.append(f"root element is {root.tag}, not svg")
    paths = []
    for el in root.iter():
        tag = el.tag.replace(NS, "")
        if tag in ("script", "image", "foreignObject", "use", "a", "style", "link"):
            problems.append(f"<{tag}> element")
        for k, v in el.attrib.items():
            name = k.split("}")[-1]
            if name == "href" or name.startswith("on"):
                problems.append(f"attribute {name}={v!r} on <{tag}>")
            if "url(" in v or "@import" in v or "javascript:" in v:
                problems.append(f"external reference {v!r} on <{tag}>")
        if tag == "path":
            paths.append(len(re.findall(r"[ML]", el.get("d", ""))))
    if len(root.findall(f".//{NS}text")) == 0:
        problems.append("no <text> element (labels must be text)")
    if len(paths) != want_paths:
        problems.append(f"{len(paths)} paths, want {want_paths}")
    elif want_points and paths != want_points:
        problems.append(f"points per path {paths}, want {want_points}")
    if problems:
        print(f"{path}: " + "; ".join(problems))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
