-- Equivalence of a parallel model with its single-rank twin, over EVERY parameter: each
-- named parameter's value and gradient, reassembled where the layout splits it, against the
-- reference model's parameter of the same name. Nothing is chosen: a parameter the parallel
-- model has and the reference lacks, or one the reference has that no rank compared, is a
-- failure too.
--
--   local E = require("equivalence")
--   local got = E.entries(model, {group = tp_group, rename = fn})  -- after backward (or a step)
--   E.check(T, "tp=2", got, ref_model)                          -- fails the test on any difference
--
-- Entries are {name, value, grad} in the reference's names, full tensors. Layouts whose
-- state is not in the parameters (ZeRO's shards) build entries from their own state
-- (E.zero_entries). Every rank of the world must call E.diff / E.check together (coverage
-- is agreed over the world).
local E = {}

-- The whole tensor from this rank's slice t of parameter p, all-gathered over group along
-- p.partition_dim. With partition_stride k the full tensor is k blocks (q, k, v), each split
-- across the ranks, so rank r holds [block 1 part r, ..., block k part r].
function E.unsplit(t, p, group)
  if not p.tensor_model_parallel or lab.dist.world(group) == 1 then return t end
  local dim, k = p.partition_dim, p.partition_stride or 1
  local parts = lab.dist.all_gather(t:contiguous(), { group = group })
  if k == 1 then return lab.cat(parts, dim) end
  local blocks = {}
  for j = 1, k do
    for _, part in ipairs(parts) do
      local len = part.shape[dim] // k
      blocks[#blocks + 1] = part:narrow(dim, (j - 1) * len + 1, len)
    end
  end
  return lab.cat(blocks, dim)
end

-- Entries for a module whose parameters are whole or tensor-parallel slices.
-- opts: group (the tensor-parallel group the marked parameters are split over),
-- rename(name) -> the reference's name (or nil: the parameter is not compared; say why in
-- the caller), grads (false: values only).
function E.entries(model, opts)
  opts = opts or {}
  local out = {}
  for _, np in ipairs(model:named_parameters()) do
    local name, p = np[1], np[2]
    if opts.rename then name = opts.rename(name) end
    if name then
      local g = p.grad
      out[#out + 1] = {
        name = name,
        value = lab.no_grad(function() return E.unsplit(p:detach(), p, opts.group) end),
        grad = g and E.unsplit(g, p, opts.group) or nil,
      }
    end
  end
  return out
end

-- Entries for a ZeRO engine: values from the parameter shards (all-gathered), gradients
-- from the reduced gradient shards (what the optimizer step uses). Call it after
-- engine:reduce_gradients() for gradients, after engine:step() for values.
function E.zero_entries(engine, opts)
  opts = opts or {}
  local out = {}
  local grads = engine:gathered_gradients()
  local values = engine:gathered_parameters()
  for _, np in ipairs(engine.module:named_parameters()) do
    local name = opts.rename and opts.rename(np[1]) or np[1]
    out[#out + 1] = { name = name, value = values[np[2]], grad = grads[np[2]] }
  end
  return out
end

local function close(a, b, rtol, atol)
  if table.concat(a.shape, ",") ~= table.concat(b.shape, ",") then
    return false, string.format("shape [%s] vs [%s]", table.concat(a.shape, ","), table.concat(b.shape, ","))
  end
  local a64, b64 = a:to("f64"), b:to("f64")
  local d = lab.max_abs_diff(a64, b64)
  local ok = lab.allclose(a64, b64, rtol, atol)
  return ok, string.format("max |diff| %.3g", d)
end

-- The differences between entries and the reference model, as a list of sentences (empty
-- when everything matches). opts: rtol (1e-5), atol (1e-6), values (true), grads (true),
-- skip (a set of reference names the caller leaves out, saying why where it calls).
function E.diff(entries, ref, opts)
  opts = opts or {}
  local rtol, atol = opts.rtol or 1e-5, opts.atol or 1e-6
  local problems = {}
  local ref_named = ref:named_parameters()
  local ref_of, index = {}, {}
  for i, np in ipairs(ref_named) do
    ref_of[np[1]], index[np[1]] = np[2], i
  end
  local seen = lab.zeros(#ref_named, { dtype = "i64" })
  for _, e in ipairs(entries) do
    local q = ref_of[e.name]
    if not q then
      problems[#problems + 1] = e.name .. ": the reference has no parameter of this name"
    else
      seen[index[e.name]] = 1
      if opts.values ~= false then
        local ok, why = close(e.value, q:detach(), rtol, atol)
        if not ok then problems[#problems + 1] = e.name .. ": value differs (" .. why .. ")" end
      end
      if opts.grads ~= false then
        if (e.grad == nil) ~= (q.grad == nil) then
          problems[#problems + 1] = string.format("%s: gradient %s here, %s in the reference", e.name,
            e.grad and "present" or "missing", q.grad and "present" or "missing")
        elseif e.grad then
          local ok, why = close(e.grad, q.grad, rtol, atol)
          if not ok then problems[#problems + 1] = e.name .. ": gradient differs (" .. why .. ")" end
        end
      end
    end
  end
  -- every reference parameter must have been compared on some rank (pipeline stages each
  -- hold some)
  lab.dist.all_reduce(seen, { op = "max" })
  for i, np in ipairs(ref_named) do
    if seen[i] == 0 and not (opts.skip and opts.skip[np[1]]) then
      problems[#problems + 1] = np[1] .. ": compared on no rank"
    end
  end
  return problems
end

-- Fails the running test once per difference, naming the parameter and the layout.
function E.check(T, label, entries, ref, opts)
  local problems = E.diff(entries, ref, opts)
  for _, p in ipairs(problems) do T.ok(false, label .. ": " .. p) end
  T.ok(#entries > 0, label .. ": nothing to compare")
  return #problems == 0
end

return E
