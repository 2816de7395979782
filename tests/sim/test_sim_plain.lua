-- The sim device in a build without the SIMT interpreter (no CUDA headers at build time, as on a
-- machine without the toolkit): it runs the cpu kernels behind the device seam, refuses what a
-- GPU refuses (an integer matmul), and lab.sim's functions say why they have nothing to report.
-- Run: build-plain/llmlab --device sim tests/sim/test_sim_plain.lua (ctest in build-plain/:
-- sim.test_sim_plain; scripts/test --plain)
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local T = require("harness")

T.test("lab.sim without the interpreter: available is false, each function raises why", function()
  T.eq(lab.sim.available, false)
  for _, name in ipairs({ "stats", "perf", "hazards", "perf_report", "reset" }) do
    local ok, err = pcall(lab.sim[name])
    T.ok(not ok and tostring(err):find("lab.sim." .. name .. ": this llmlab was built without the SIMT interpreter", 1, true),
      name .. ": " .. tostring(err))
  end
end)

T.test("ops on sim = cpu; an integer matmul refused as on cuda", function()
  lab.manual_seed(5)
  local a = lab.randn({ 8, 16 }, { device = "cpu" })
  local b = lab.randn({ 16, 4 }, { device = "cpu" })
  local want = (a:matmul(b) * 2 + 1):softmax(-1)
  local got = (a:to("sim"):matmul(b:to("sim")) * 2 + 1):softmax(-1)
  T.eq(got.device, "sim:0")
  T.ok((got:to("cpu") - want):abs():max():item() == 0, "sim's cpu kernels give the cpu's values bit for bit")
  local ia, ib = lab.tensor({ { 1, 2 } }, { device = "sim" }), lab.tensor({ { 3 }, { 4 } }, { device = "sim" })
  local ok, err = pcall(ia.matmul, ia, ib)
  T.ok(not ok and tostring(err):find("matmul: integer matrix products are not supported on cuda", 1, true),
    tostring(err))
end)

T.finish()
