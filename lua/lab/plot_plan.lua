-- The planner's answer as a picture (lab.plan{...} draws it under its table): the step time
-- against the memory per GPU of every layout that fits, one dot each, the chosen layout
-- marked. Kept apart from plan.lua, which calls it with its result list.
local M = {}

-- results: plan.enumerate's list, best first; o: plan's options (svg= writes the SVG too,
-- width= the chart's width); layout(r) names a layout
function M.draw(results, o, layout)
  if #results == 0 then return end
  local x, y = {}, {}
  for i, r in ipairs(results) do x[i], y[i] = r.mem_total / 1e9, r.step_s end
  local best = results[1]
  local label = layout(best)
  lab.plot.line({ { name = string.format("%d layouts that fit", #results), x = x, y = y },
    { name = "chosen: " .. label, x = { x[1] }, y = { y[1] } } },
    { points = true, logy = true, title = "step time vs memory per GPU", xlabel = "memory per GPU (GB)", ylabel = "step s",
      marks = { { x = x[1], label = label } }, height = 10, svg = o.svg, width = o.width })
end

return M
