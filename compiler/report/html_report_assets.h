// The HTML report's style sheet and script (html_report.h), written into the
// page itself so that it opens from a file on a machine with no network.
// The script is plain JavaScript with no library: it sorts the kernel table
// by a column, groups its rows by the grouping picked (from the groups the
// page's JSON carries, perf_groups.h), zooms the plan's drawing, switches
// the roofline's level, and takes a click on a box or a dot to the
// kernel's row. The page reads whole without it.
#pragma once

namespace llmc {

const char* htmlReportStyle();
const char* htmlReportScript();

}  // namespace llmc
