-- Gradients that enter the engine from user code are checked against the input they flow
-- into (issue 11: a register_hook on a layer_norm output returning lab.ones(1) overflowed a heap
-- buffer; on cross_entropy a hook returning lab.zeros(0) segfaulted; autograd.Function
-- backward likewise). Hooks and Functions made inside a coroutine keep working after the
-- coroutine is collected (they kept its lua_State). Run at 1 and 2 ranks. The coroutine test
-- fails on the old code only where freed memory is overwritten: an ASan build with
-- ASAN_OPTIONS=max_free_fill_size=65536:free_fill_byte=255 (liblua, not instrumented, reads it).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local R = "rank " .. lab.dist.rank() .. ": "

local function with_hook(make, replacement)
  local x = lab.randn(2, 8, { requires_grad = true })
  local y = make(x)
  y:register_hook(function() return replacement end)
  return function() y:sum():backward() end, x
end

T.test("a hook returning a gradient of the wrong shape is refused", function()
  local ln = function(x) return lab.layer_norm(x, nil, nil) end
  local run = with_hook(ln, lab.ones(1))
  T.raises(run, R .. "backward: hook on layer_norm returned a gradient of shape [1], expected [2, 8]")
  run = with_hook(function(x) return x:gelu() end, lab.ones(1))
  T.raises(run, R .. "backward: hook on gelu returned a gradient of shape [1], expected [2, 8]")
  run = with_hook(function(x) return x:silu() end, lab.ones(8, 2))
  T.raises(run, R .. "backward: hook on silu returned a gradient of shape [8, 2], expected [2, 8]")
  run = with_hook(function(x) return x * 2 end, lab.ones(2, 8, { dtype = "i64" }))
  T.raises(run, R .. "backward: hook on mul returned a gradient of dtype i64, expected a floating dtype")
  -- cross_entropy's output is a scalar: a hook returning an empty tensor
  local logits = lab.randn(3, 5, { requires_grad = true })
  local loss = lab.cross_entropy(logits, lab.tensor({ 0, 4, 2 }))
  loss:register_hook(function() return lab.zeros(0) end)
  T.raises(function() loss:backward() end, R .. "backward: hook on cross_entropy returned a gradient of shape [0], expected []")
  -- a hook on a leaf
  local w = lab.ones(3, { requires_grad = true })
  w:register_hook(function() return lab.ones(4) end)
  T.raises(function() (w * 2):sum():backward() end, R .. "backward: hook on a leaf tensor returned a gradient of shape [4], expected [3]")
  T.eq(w.grad, nil, "nothing was accumulated")
end)

T.test("a hook returning a good replacement still works", function()
  local x = lab.ones(2, 3, { requires_grad = true })
  local y = x * 3
  y:register_hook(function(g) return g * 2 end)
  y:sum():backward()
  T.values(x.grad, { { 6, 6, 6 }, { 6, 6, 6 } }, 0, "scaled gradient")
  local z = lab.ones(2, { requires_grad = true })
  local h = z * 1
  h:register_hook(function(g) return g:double() end) -- another float dtype is accepted
  h:sum():backward()
  T.values(z.grad, { 1, 1 }, 0, "f64 replacement accumulated into the f32 leaf")
  T.eq(z.grad.dtype, "f32", "leaf .grad keeps the leaf's dtype")
end)

T.test("autograd.Function backward gradients are checked per input", function()
  local Bad = lab.autograd.Function({
    forward = function(ctx, a, b) return a * b end,
    backward = function(ctx, g) return g, lab.ones(1) end,
  })
  local a = lab.ones(2, 8, { requires_grad = true })
  local b = lab.ones(2, 8, { requires_grad = true })
  T.raises(function() Bad(a, b):sum():backward() end,
    R .. "backward: Function backward (input 2) returned a gradient of shape [1], expected [2, 8]")
  local Empty = lab.autograd.Function({
    forward = function(ctx, x) return x:sum() end,
    backward = function(ctx, g) return lab.zeros(0) end,
  })
  T.raises(function() Empty(lab.ones(3, { requires_grad = true })):backward() end,
    R .. "backward: Function backward (input 1) returned a gradient of shape [0], expected [3]")
  local Good = lab.autograd.Function({
    forward = function(ctx, x) return x * 2 end,
    backward = function(ctx, g) return g * 2 end,
  })
  local x = lab.ones(3, { requires_grad = true })
  Good(x):sum():backward()
  T.values(x.grad, { 2, 2, 2 }, 0, "a good Function")
end)

T.test("hooks and Functions made inside a coroutine outlive it", function()
  local x = lab.ones(3, { requires_grad = true })
  local seen = {}
  local Double = lab.autograd.Function({
    forward = function(ctx, v) return v * 2 end,
    backward = function(ctx, g) seen[#seen + 1] = "function" return g * 2 end,
  })
  local y
  local co = coroutine.create(function()
    local h = Double(x)
    h:register_hook(function(g) seen[#seen + 1] = "hook" return g * 10 end)
    y = h:sum()
    coroutine.yield()
  end)
  assert(coroutine.resume(co))
  co = nil
  for _ = 1, 3 do collectgarbage("collect") end -- the coroutine's lua_State is freed here
  local junk = {}
  for i = 1, 1000 do junk[i] = coroutine.create(function() return i end) end -- reuse its memory
  y:backward()
  T.values(x.grad, { 20, 20, 20 }, 0, "hook x10 then Function x2")
  T.eq(table.concat(seen, ","), "hook,function", "both ran")
  -- a backward started inside a coroutine runs hooks made outside it
  local z = lab.ones(2, { requires_grad = true })
  local w = z * 1
  w:register_hook(function(g) return g * 3 end)
  local co2 = coroutine.wrap(function() w:sum():backward() end)
  co2()
  T.values(z.grad, { 3, 3 }, 0, "backward inside a coroutine")
end)

T.finish()
