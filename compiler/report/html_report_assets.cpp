#include "report/html_report_assets.h"

#include <string>

namespace llmc {

namespace {

constexpr const char kStyle[] = R"CSS(
body { font: 13px/1.4 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0 24px 40px; color: #222; }
h1 { font-size: 20px; margin: 18px 0 4px; }
h2 { font-size: 16px; margin: 28px 0 6px; border-bottom: 1px solid #ddd; padding-bottom: 3px; }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px; }
.command { background: #f5f5f5; padding: 6px 8px; border-radius: 4px; overflow-wrap: anywhere; }
.summary { margin: 6px 0; }
nav a { margin-right: 14px; }
.note { color: #555; max-width: 1100px; }
.missing { background: #fff4e5; border: 1px solid #f0c36d; padding: 8px 10px; border-radius: 4px; }
.controls { margin: 8px 0; display: flex; gap: 10px; align-items: center; flex-wrap: wrap; }
button { font: inherit; padding: 2px 10px; }
.drawing { max-height: 60vh; overflow: auto; border: 1px solid #ccc; background: #fff; }
.drawing svg { display: block; margin: 0 auto; }
.drawing g.kernel-box { cursor: pointer; }
.drawing g.kernel-box:hover polygon { stroke: #d62728; stroke-width: 2; }
.table-wrap { max-height: 80vh; overflow: auto; border: 1px solid #ccc; }
table.kernels { border-collapse: collapse; font-size: 12px; white-space: nowrap; }
table.kernels th, table.kernels td { padding: 2px 5px; border-bottom: 1px solid #eee; text-align: left; }
table.kernels th { position: sticky; top: 0; background: #f0f0f0; cursor: pointer; user-select: none; z-index: 1; }
table.kernels th.num, table.kernels td.num { text-align: right; }
table.kernels th.asc::after { content: " \25B2"; }
table.kernels th.desc::after { content: " \25BC"; }
table.kernels tbody tr:hover { background: #f7f7ff; }
table.kernels tr.group td { background: #e8eef7; font-weight: 600; cursor: pointer; border-top: 1px solid #b8c6dc; }
table.kernels tr.highlight td { background: #ffe9a8; }
table.kernels td.path, table.kernels td.partition { white-space: normal; overflow-wrap: break-word; min-width: 140px; max-width: 200px; }
.swatch { display: inline-block; width: 9px; height: 9px; border-radius: 50%; margin-right: 5px; }
.unfit { color: #c00; }
svg.roofline { max-width: 100%; height: auto; font-family: system-ui, Helvetica, Arial, sans-serif; }
svg.roofline .grid line { stroke: #e6e6e6; }
svg.roofline .frame { fill: none; stroke: #999; }
svg.roofline .tick { font-size: 11px; fill: #555; }
svg.roofline .axis-title { font-size: 12px; fill: #333; }
svg.roofline .roof-label { font-size: 11px; }
svg.roofline .roofs line { stroke-width: 1.5; }
svg.roofline .legend text { font-size: 12px; fill: #333; }
svg.roofline .dot { cursor: pointer; }
svg.roofline .dot:hover { stroke: #d62728; stroke-width: 3; }
)CSS";

// The kernel table: sorted by a column, grouped by the grouping picked, a
// kernel's row shown on request (showRow). The first half of the script's
// function, whose variables the second half (kFigureScript) uses.
constexpr const char kTableScript[] = R"JS(
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const table = document.getElementById("kernel-table");
  const tbody = table.tBodies[0];
  const rows = Array.from(tbody.rows);  // the kernels' rows, in plan order
  const headers = Array.from(table.tHead.rows[0].cells);
  let sortColumn = 0, sortDescending = false, grouping = null, collapsed = new Set();

  // A cell's value: its data-v as a number where it has one ("" for none), else its text.
  function cellValue(row, column) {
    const cell = row.cells[column];
    if (cell.dataset.v === undefined) return cell.textContent;
    return cell.dataset.v === "" ? null : Number(cell.dataset.v);
  }
  function compareRows(a, b) {
    const x = cellValue(a, sortColumn), y = cellValue(b, sortColumn);
    if (x === null || y === null) return x === y ? 0 : x === null ? 1 : -1;  // no value last, either way
    const order = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
    return sortDescending ? -order : order;
  }
  function percent(part, whole) { return whole > 0 ? (100 * part / whole).toFixed(1) + "%" : "-"; }
  function groupRow(group, index) {
    const tr = document.createElement("tr");
    tr.className = "group";
    const td = document.createElement("td");
    td.colSpan = headers.length;
    let text = (collapsed.has(index) ? "\u25B8 " : "\u25BE ") + group.key + " \u2014 " + group.kernels +
        (group.kernels === 1 ? " kernel" : " kernels") + ", predicted " + (group.predicted * 1e3).toFixed(3) +
        " ms (" + percent(group.predicted, data.predicted) + " of the step)";
    if (data.measured !== null)
      text += ", measured " + (group.measured * 1e3).toFixed(3) + " ms (" + percent(group.measured, data.measured) + ")";
    td.textContent = text;
    tr.appendChild(td);
    tr.addEventListener("click", function () {
      if (collapsed.has(index)) collapsed.delete(index); else collapsed.add(index);
      render();
    });
    return tr;
  }
  // The table again: the rows sorted, under their groups' rows where a grouping is picked.
  function render() {
    const sorted = rows.slice().sort(compareRows);
    while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
    headers.forEach(function (th, i) {
      th.classList.toggle("asc", i === sortColumn && !sortDescending);
      th.classList.toggle("desc", i === sortColumn && sortDescending);
    });
    if (grouping === null) {
      sorted.forEach(function (r) { r.hidden = false; tbody.appendChild(r); });
      return;
    }
    const members = grouping.groups.map(function () { return []; });
    sorted.forEach(function (r) { members[grouping.keys[Number(r.dataset.row)]].push(r); });
    grouping.groups.forEach(function (group, i) {
      tbody.appendChild(groupRow(group, i));
      members[i].forEach(function (r) { r.hidden = collapsed.has(i); tbody.appendChild(r); });
    });
  }
  headers.forEach(function (th, i) {
    th.addEventListener("click", function () {
      // A number's first click sorts largest first; a name's, A to Z.
      if (sortColumn === i) sortDescending = !sortDescending;
      else { sortColumn = i; sortDescending = th.classList.contains("num") && i !== 0; }
      render();
    });
  });
  const groupBy = document.getElementById("group-by");
  function pickGrouping() {
    grouping = data.groupings.find(function (g) { return g.name === groupBy.value; }) || null;
    collapsed = new Set(grouping ? grouping.groups.map(function (g, i) { return i; }) : []);
    render();
  }
  groupBy.addEventListener("change", pickGrouping);
  document.getElementById("expand-all").addEventListener("click", function () { collapsed.clear(); render(); });
  document.getElementById("collapse-all").addEventListener("click", function () {
    if (grouping) collapsed = new Set(grouping.groups.map(function (g, i) { return i; }));
    render();
  });

  // A kernel's row shown, its group opened, and marked for a moment.
  function showRow(index) {
    const row = rows[index];
    if (!row) return;
    if (grouping && collapsed.delete(grouping.keys[index])) render();
    row.scrollIntoView({block: "center"});
    row.classList.add("highlight");
    setTimeout(function () { row.classList.remove("highlight"); }, 2500);
  }
)JS";

// The plan's drawing and the roofline, and the grouping a link asks for.
constexpr const char kFigureScript[] = R"JS(
  // The plan's drawing: fit to the page's width or at a scale of its own size.
  const drawing = document.querySelector("#plan .drawing svg");
  if (drawing) {
    const box = drawing.viewBox.baseVal;
    const bounds = drawing.getBoundingClientRect();
    const naturalWidth = box && box.width > 0 ? box.width * 4 / 3 : bounds.width;  // pt to px
    const naturalHeight = box && box.height > 0 ? box.height * 4 / 3 : bounds.height;
    let scale = 1;
    // The whole drawing in its frame: the frame's width, and at most its
    // greatest height (60% of the window's, less its border).
    const fit = function () {
      const width = drawing.parentElement.clientWidth, height = 0.6 * window.innerHeight - 4;
      scale = Math.min(width / naturalWidth, height / naturalHeight);
      atScale();
    };
    const atScale = function () { drawing.style.width = (naturalWidth * scale) + "px"; drawing.style.height = "auto"; };
    document.getElementById("zoom-fit").addEventListener("click", fit);
    document.getElementById("zoom-actual").addEventListener("click", function () { scale = 1; atScale(); });
    document.getElementById("zoom-in").addEventListener("click", function () { scale *= 1.5; atScale(); });
    document.getElementById("zoom-out").addEventListener("click", function () { scale /= 1.5; atScale(); });
    if (naturalWidth > drawing.parentElement.clientWidth || naturalHeight > 0.6 * window.innerHeight) fit();
    drawing.querySelectorAll("g.node").forEach(function (node) {
      const title = node.querySelector("title");
      const match = title && /^kernel(\d+)$/.exec(title.textContent);
      if (!match) return;
      node.classList.add("kernel-box");
      node.addEventListener("click", function () { showRow(Number(match[1])); });
    });
  }

  // The roofline: one level's plot at a time; a dot's click goes to its kernel.
  document.querySelectorAll("input[name=roofline-level]").forEach(function (input) {
    input.addEventListener("change", function () {
      document.querySelectorAll("svg.roofline").forEach(function (svg) {
        svg.style.display = svg.dataset.level === input.value ? "" : "none";
      });
    });
  });
  document.querySelectorAll("svg.roofline .dot").forEach(function (dot) {
    dot.addEventListener("click", function () { showRow(Number(dot.dataset.row)); });
  });
  // A link may pick the grouping: page.html#group=path:3 (its groups closed).
  const asked = /(?:^#|&)group=([^&]*)/.exec(window.location.hash);
  if (asked && data.groupings.some(function (g) { return g.name === decodeURIComponent(asked[1]); })) {
    groupBy.value = decodeURIComponent(asked[1]);
    pickGrouping();
  } else {
    render();
  }
)JS";

}  // namespace

const char* htmlReportStyle() { return kStyle; }

// One function's scope for both halves, so that nothing is left global.
const char* htmlReportScript() {
  static const std::string script =
      std::string("\n\"use strict\";\n(function () {") + kTableScript + kFigureScript + "})();\n";
  return script.c_str();
}

}  // namespace llmc
