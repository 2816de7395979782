-- Issue 23, defects 2 and 4's LLMLAB_CUDA_LAUNCH_BLOCKING: a kernel launch that fails is raised
-- by the op that launched it, naming the op (the void entries once dropped the status and the
-- error surfaced later as an unrelated copy failure, or never); a device-side id check that
-- fails is raised at the next wait, or, with LLMLAB_CUDA_LAUNCH_BLOCKING=1, at the op itself
-- (before the fix it was raised neither at the op nor at the read-back). Each case runs in a
-- child process, since both settings are read from the environment (runtime/cuda/cuda_device.c:
-- LLMLAB_CUDA_INJECT_LAUNCH_ERROR=op makes every launch of that op fail).
-- Run: build/llmlab --device sim tests/sim/test_launch_errors.lua (ctest: sim.test_launch_errors)
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local T = require("harness")

local first = -1
while arg[first - 1] do first = first - 1 end
local exe = arg[first] -- the llmlab binary, before its options

-- runs code in a child on the sim with env set, returns its output (stdout and stderr)
local function child(env, code)
  local out = os.tmpname()
  local cmd = string.format("%s %s --device sim -e %q >%s 2>&1", env, exe, code, out)
  os.execute(cmd)
  local f = io.open(out)
  local text = f:read("a")
  f:close()
  os.remove(out)
  return text
end

-- each line the child prints: "where<TAB>ok<TAB>error"
local bad_id = [[
local w = lab.randn(10, 4)
local ids = lab.tensor({1, 12, 3}):to('cpu'):to('i64'):to('sim')
local ok, err = pcall(function() local e = lab.embedding(ids, w); return 1 end)
print('op', ok, ok and '' or err)
local ok2, err2 = pcall(function() return lab.ones(3):sum():item() end)
print('readback', ok2, ok2 and '' or err2)
local good = lab.embedding(lab.tensor({1, 9}):to('cpu'):to('i64'):to('sim'), w):sum():item()
print('after', type(good))
local ok3, err3 = pcall(function() local e = lab.embedding(ids, w); return tostring(e) end)
print('tostring', ok3, ok3 and '' or err3)
]]

local function line(text, tag)
  local ok, err = text:match("\n?" .. tag .. "\t(%a+)\t([^\n]*)")
  return ok, err
end

T.test("a bad embedding id: raised at the read-back by default, at the op with LLMLAB_CUDA_LAUNCH_BLOCKING=1", function()
  local want = "embedding: id 12 at position 2 is outside [0, 10)"
  local text = child("", bad_id)
  local ok, err = line(text, "op")
  T.eq(ok, "true", "default: the op queues its check and returns: " .. text)
  ok, err = line(text, "readback")
  T.eq(ok, "false", "default: the next wait raises it: " .. text)
  T.ok(err and err:find(want, 1, true) and err:find("rank 0", 1, true), "default: names op, id, range, rank: " .. tostring(err))
  T.ok(text:find("after\tnumber", 1, true), "the session goes on: " .. text)
  ok, err = line(text, "tostring")
  T.ok(ok == "false" and err:find(want, 1, true), "printing the tensor raises the id, not 'out of memory': " .. tostring(err))

  text = child("LLMLAB_CUDA_LAUNCH_BLOCKING=1", bad_id)
  ok, err = line(text, "op")
  T.eq(ok, "false", "blocking: the op itself raises: " .. text)
  T.ok(err and err:find(want, 1, true) and err:find("LLMLAB_CUDA_LAUNCH_BLOCKING=1", 1, true),
       "blocking: names op, id, range and why it is raised here: " .. tostring(err))
  ok = line(text, "readback")
  T.eq(ok, "true", "blocking: raised once, the read-back after it is clean: " .. text)
  T.ok(text:find("after\tnumber", 1, true), "the session goes on: " .. text)
end)

-- each launch entry's failure, raised by its caller naming the op (both settings)
local cases = {
  { "ewise", "mul", "local x = lab.randn(4, 8); local y = x * x" },
  { "ewise", "exp", "local y = lab.randn(4, 8):exp()" },
  { "reduce", "sum", "local y = lab.randn(4, 8):sum(2)" },
  { "reduce", "norm", "local y = lab.randn(4, 8):norm()" },
  { "reduce", "max", "local y = lab.randn(4, 8):max()" },
  { "rand", "rand", "local y = lab.rand(4, 8)" },
  { "layer_norm", "layer_norm", "local y = lab.layer_norm(lab.randn(4, 8), lab.ones(8), lab.zeros(8))" },
  { "rms_norm", "rms_norm", "local y = lab.rms_norm(lab.randn(4, 8), lab.ones(8))" },
  { "softmax", "softmax", "local y = lab.randn(4, 8):softmax(2)" },
  { "sum", "sum", "local y = lab.randn(64, 8):sum(1)" },
  { "embedding", "embedding", "local y = lab.embedding(lab.tensor({1, 2}):to('cpu'):to('i64'):to('sim'), lab.randn(4, 8))" },
  { "cross_entropy", "cross_entropy",
    "local y = lab.cross_entropy(lab.randn(3, 5), lab.tensor({1, 2, 0}):to('cpu'):to('i64'):to('sim'))" },
  { "adamw", "adamw",
    "local p = lab.randn(8):requires_grad_(); (p * p):sum():backward(); lab.optim.AdamW({p}, {lr = 0.1}):step()" },
}

T.test("an injected launch failure of each entry is raised by the op, naming it (both settings)", function()
  for _, blocking in ipairs({ "", "LLMLAB_CUDA_LAUNCH_BLOCKING=1 " }) do
    for _, c in ipairs(cases) do
      local code = string.format("print('r', pcall(function() %s end))", c[3])
      local text = child(blocking .. "LLMLAB_CUDA_INJECT_LAUNCH_ERROR=" .. c[1], code)
      local ok, err = text:match("r\t(%a+)\t([^\n]*)")
      local what = blocking .. c[1] .. " under " .. c[2]
      T.eq(ok, "false", what .. ": the op raises: " .. text)
      T.ok(err and err:find("rank 0: " .. c[2] .. ": ", 1, true), what .. ": names the op: " .. tostring(err))
      T.ok(err and err:find("kernel launch failed", 1, true), what .. ": says the launch failed: " .. tostring(err))
    end
  end
  -- and without the injection each runs (the cases are right)
  for _, c in ipairs(cases) do
    local text = child("", string.format("print('r', pcall(function() %s end))", c[3]))
    T.ok(text:find("r\ttrue", 1, true), c[2] .. " runs: " .. text)
  end
end)

T.finish()
