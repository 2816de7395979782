-- lab.autograd.gradcheck: compares the gradients backward() computes with central finite
-- differences, as torch.autograd.gradcheck does. Use f64 inputs: in f32 the differences
-- drown in rounding.
local errors = require("lab.errors")
local lab = lab
local M = lab.autograd

-- fn(...) -> tensor; inputs: a list of tensors (those with requires_grad are checked).
-- The output is projected on a fixed random direction v, so one backward checks the whole
-- vector-Jacobian product: d(sum(fn(x) * v))/dx against (f(x+eps) - f(x-eps)) / 2eps.
-- Returns true, or false and a message naming the input, element and both values.
function M.gradcheck(fn, inputs, opts)
  errors.arg(type(fn) == "function" or (type(fn) == "table" and getmetatable(fn) and getmetatable(fn).__call),
    "lab.autograd.gradcheck", 1, "a function", fn)
  errors.type("lab.autograd.gradcheck", 2, inputs, "table", "a list of tensors")
  errors.opts("lab.autograd.gradcheck", 3, opts)
  opts = opts or {}
  local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
  local out = fn(table.unpack(inputs))
  if not lab.is_tensor(out) then errors.raise("lab.autograd.gradcheck", "the function returned a %s, not a tensor", type(out)) end
  local state = lab.get_rng_state()
  lab.manual_seed(12345)
  -- drawn on the cpu (the same projection whatever the device), then moved to out's
  local v = lab.randn(out.shape, { dtype = "f64", device = "cpu" }):to(out.dtype):to(out.device)
  lab.set_rng_state(state)
  for _, x in ipairs(inputs) do
    if lab.is_tensor(x) and x.requires_grad then x.grad = nil end
  end
  local proj = (out * v):sum()
  proj:backward()
  local function f_at()
    return lab.no_grad(function() return (fn(table.unpack(inputs)) * v):sum():item() end)
  end
  for k, x in ipairs(inputs) do
    if lab.is_tensor(x) and x.requires_grad then
      local analytic = x.grad and x.grad:contiguous():view(-1) or lab.zeros(x:numel(), { dtype = "f64" })
      local flat = x:view(-1)
      for i = 1, x:numel() do
        local old = flat[i]
        lab.no_grad(function() flat[i] = old + eps end)
        local up = f_at()
        lab.no_grad(function() flat[i] = old - eps end)
        local down = f_at()
        lab.no_grad(function() flat[i] = old end)
        local numeric = (up - down) / (2 * eps)
        local a = analytic[i]
        if math.abs(a - numeric) > atol + rtol * math.abs(numeric) then
          return false, string.format("input %d, element %d: backward gives %.8g, finite differences %.8g", k, i, a, numeric)
        end
      end
    end
  end
  return true
end

return M
