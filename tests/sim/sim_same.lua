-- Shared by the sim's NCCL tests (test_sim_nccl.lua, test_sim_p2p.lua): every element of a sim
-- result against the cpu's, shapes first, within tol (0: exact).
local T = require("harness")
return function(sim, ref, what, tol)
  local a, b = sim:to("cpu"):to("f64"), ref:to("cpu"):to("f64")
  T.eq(table.concat(a.shape, "x"), table.concat(b.shape, "x"), what .. " shape")
  local d = a:numel() > 0 and (a - b):abs():max():item() or 0
  T.ok(d <= (tol or 0), string.format("%s: max |sim - cpu| = %.3g", what, d))
end
