-- lab.prof at any world size: nesting, communication recorded apart from compute, the
-- cross-rank report, and the Chrome trace with one track per rank.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local r, n = lab.dist.rank(), lab.dist.world()
local prof = lab.prof

T.test("sections nest and split compute from communication", function()
  prof.reset()
  for _ = 1, 3 do
    prof.section("outer", function()
      prof.section("compute", function()
        local a = lab.randn(64, 64)
        for _ = 1, 20 do a = a:matmul(a):tanh() end
      end)
      do
        local s <close> = prof.scope("talk")
        lab.dist.all_reduce(lab.ones(1000))
        lab.dist.barrier()
      end
    end)
  end
  local t = prof.totals()
  T.eq(t["outer"].count, 3)
  T.eq(t["outer/compute"].count, 3)
  T.ok(t["outer/compute"].comm == 0, "no communication inside compute")
  T.ok(n == 1 or t["outer/talk"].comm > 0, "communication time recorded inside talk")
  T.ok(t["outer"].time >= t["outer/compute"].time + t["outer/talk"].time * 0.99, "a parent covers its children")
  T.ok(t["outer/compute"].busy > 0, "busy (CPU time outside collectives) recorded")
  T.ok(t["outer/talk"].busy < t["outer/compute"].busy, "a section that only communicates is less busy than compute")
  T.raises(function() prof.stop() end, "no section is open")
end)

T.test("report aggregates every rank; trace has a track per rank", function()
  local rows = prof.report()
  T.eq(#rows["outer/compute"].times, n, "one time per rank")
  T.eq(#rows["outer/compute"].busys, n, "one busy time per rank")
  T.eq(rows.oversubscribed, lab.dist.local_world() > lab.cores(), "oversubscribed when ranks on the node exceed cores")
  local path = os.tmpname()
  prof.trace(path)
  if r == 0 then
    local text = io.open(path):read("a")
    T.ok(text:match('^{"traceEvents":%['), "Chrome trace JSON")
    for q = 0, n - 1 do
      T.ok(text:find('"tid":' .. q .. ',', 1, true), "events of rank " .. q)
    end
    os.remove(path)
  end
end)

T.test("kernels(): every cpu kernel is booked under its category, and only while on", function()
  local x = lab.randn(64, 32)
  lab.prof.kernels(true)
  local y = lab.layer_norm(x:matmul(lab.randn(32, 32)))
  local _ = y:gelu() + y
  local k = lab.prof.kernel_totals()
  lab.prof.kernels(false)
  T.ok(k.gemm.calls == 1 and k.gemm.wall > 0 and k.gemm.cpu >= 0, "one gemm: " .. k.gemm.calls)
  T.eq(k.norm.calls, 1, "one layer_norm")
  T.eq(k.activation.calls, 1, "one gelu")
  T.ok(k.elementwise.calls >= 1, "the add and randn are elementwise work")
  T.eq(k.optimizer.calls + k.attention.calls + k.loss.calls + k.embedding.calls, 0, "nothing else ran")
  local _ = x:matmul(x:t())
  local off = lab.prof.kernel_totals()
  T.eq(off.gemm.calls, 0, "off: reset and not counting")
end)

T.finish()
