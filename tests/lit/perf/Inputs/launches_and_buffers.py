"""Prints a launch description (llmc-compile --emit launches, on stdin) a line
per launch (name, role, kernel) and a line per buffer (name, the graph outputs
it holds), for FileCheck."""
import json
import sys

d = json.load(sys.stdin)
for launch in d["launches"]:
    print("launch", launch["name"], launch["role"], launch["kernel"])
for buffer in d["buffers"]:
    print("buffer", buffer["name"], "outputs:", " ".join(buffer["graph_outputs"]) or "-")
