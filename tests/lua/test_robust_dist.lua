-- Point-to-point messages carry their dtype and size, so a mismatched recv is an error naming
-- both sides instead of garbage or a crash (issue 11: f16[4] sent to f32[2] gave garbage; f32
-- into i64 reported "the message held 2"; i64[1<<20] to f32[1<<20] raised MPI_ERR_TRUNCATE).
-- Process groups are freed when collected or destroyed, so new_group has no lifetime limit
-- (after 256 calls every further one failed). At 1 rank the p2p part has no peer and is skipped.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local r, n = lab.dist.rank(), lab.dist.world()
local R = "rank " .. r .. ": "

if n >= 2 then
  -- rank 0 sends `sent`, rank 1 receives into `into` (blocking or async), and every rank
  -- agrees afterwards; rank 1's error must contain the fragments
  local function mismatch(what, sent, into, async, ...)
    local frags = { ... }
    T.test(what, function()
      if r == 0 then
        if async then lab.dist.isend(sent, 1):wait() else lab.dist.send(sent, 1) end
      elseif r == 1 then
        local ok, err = pcall(function()
          if async then lab.dist.irecv(into, 0):wait() else lab.dist.recv(into, 0) end
        end)
        T.ok(not ok, what .. ": the mismatch was not refused")
        for _, f in ipairs(frags) do T.ok(tostring(err):find(f, 1, true) ~= nil, string.format("%q lacks %q", tostring(err), f)) end
      end
      lab.dist.barrier()
    end)
  end
  local big = 1 << 20
  mismatch("equal bytes, other dtype", lab.ones(4, { dtype = "f16" }), lab.zeros(2), false,
    "rank 1: recv: rank 0 sent f16[4], this rank receives into f32[2]")
  mismatch("f32 into i64", lab.ones(4), lab.zeros(4, { dtype = "i64" }), false, "recv: rank 0 sent f32[4], this rank receives into i64[4]")
  mismatch("longer message, async", lab.zeros(big, { dtype = "i64" }), lab.zeros(big), true,
    "recv: rank 0 sent more bytes than the receiving tensor f32[1048576] holds")
  mismatch("shorter message, async", lab.ones(3, { dtype = "bf16" }), lab.zeros(1, { dtype = "f64" }), true,
    "recv: rank 0 sent bf16[3], this rank receives into f64[1]")
  mismatch("fewer elements", lab.ones(1), lab.zeros(4, { dtype = "f64" }), false, "recv: rank 0 sent f32[1], this rank receives into f64[4]")

  T.test("matching p2p still works, empty tensors too, and after refusals", function()
    if r == 0 then
      lab.dist.send(lab.arange(5, { dtype = "f64" }), 1)
      lab.dist.isend(lab.zeros(0), 1):wait()
      lab.dist.send(lab.tensor({ 7, 8 }, { dtype = "i32" }), 1, { tag = 3 })
    elseif r == 1 then
      local a = lab.zeros(5, { dtype = "f64" })
      lab.dist.recv(a, 0)
      T.values(a, { 0, 1, 2, 3, 4 }, 0, "f64 values")
      lab.dist.irecv(lab.zeros(0), 0):wait()
      local b = lab.zeros(2, { dtype = "i32" })
      lab.dist.recv(b, 0, { tag = 3 })
      T.values(b, { 7, 8 }, 0, "i32 values with a tag")
    end
    lab.dist.barrier()
  end)
end

T.test("groups are freed when collected or destroyed", function()
  local everyone = {}
  for i = 0, n - 1 do everyone[#everyone + 1] = i end
  for i = 1, 1000 do
    local _ = lab.dist.new_group({ 0 }) -- dropped at once
    if i % 100 == 0 then collectgarbage() end
  end
  for _ = 1, 300 do
    local g = lab.dist.new_group(everyone)
    local x = lab.ones(2)
    lab.dist.all_reduce(x, { group = g })
    g:destroy()
  end
  local g = lab.dist.new_group(everyone)
  g:destroy()
  T.raises(function() return g:rank() end, R .. "the process group was destroyed")
  T.raises(function() lab.dist.all_reduce(lab.ones(1), { group = g }) end, R .. "the process group was destroyed")
  T.raises(function() lab.dist.destroy_process_group(lab.dist.world_group and lab.dist.world_group() or nil) end, R .. "destroy_process_group:")
end)

T.test("a dropped group lives while async work and graph nodes use it", function()
  local everyone = {}
  for i = 0, n - 1 do everyone[#everyone + 1] = i end
  local g = lab.dist.new_group(everyone)
  local x = lab.ones(2, { requires_grad = true })
  local y = lab.autograd.dist.all_reduce(x * 1, { group = g })
  local w = lab.dist.all_reduce(lab.ones(3), { group = g, async = true })
  g = nil
  collectgarbage()
  collectgarbage()
  w:wait()
  y:sum():backward()
  T.values(x.grad, { n, n }, 0, "backward of all_reduce ran on the collected group")
end)

T.finish()
