-- Docstrings of lab.plot (help(lab.plot.line)): lua/lab/plot.lua. Charts print on the calling
-- rank; {quiet=true} returns the text, {svg='x.svg'} also writes an SVG file.
return {
  line = "lab.plot.line(series[, opts]) -> nil|text: a line chart of one or more series (logx=, logy=, marks)",
  bar = "lab.plot.bar(data[, opts]) -> nil|text: a bar chart; {stacked=true} stacks the series",
  hist = "lab.plot.hist(values[, {bins=}]) -> nil|text: a histogram",
  heatmap = "lab.plot.heatmap(matrix[, {rows=, cols=}]) -> nil|text: a heat map with row and column labels",
  timeline = "lab.plot.timeline(rows[, opts]) -> nil|text: a row of spans per stage or rank (schedules, profiles)",
  sparkline = "lab.plot.sparkline(values[, n]) -> string: the last n values as one line of block characters",
}
