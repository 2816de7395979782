-- lab.plan's public helpers: the planner's formulas (parameter counts, FLOPs, activation
-- bytes, the traffic of every group, pipeline stages) for tests and labs that compare measured
-- runs with them. Their arguments are checked as plan{...}'s are, and every mistake names
-- the helper and the rank (plan_check.lua). plan.lua installs them on lab.plan.
local mem = require("lab.plan_memory")
local time = require("lab.plan_time")
local check = require("lab.plan_check")
local fail, need, is_int, is_num = check.fail, check.need, check.is_int, check.is_num
local model_arg, traffic_args = check.model_arg, check.traffic_args
local plan = {}

function plan.param_counts(m) return mem.param_counts(model_arg("param_counts", m)) end

function plan.model_flops(m, tokens, seq)
  m = model_arg("model_flops", m)
  need(is_num(tokens) and is_num(seq), "model_flops", "tokens and seq are finite numbers, got %s and %s", tostring(tokens), tostring(seq))
  return mem.model_flops(m, tokens, seq)
end

function plan.hardware_flops(m, tokens, seq, recompute, attention)
  m = model_arg("hardware_flops", m)
  need(is_num(tokens) and is_num(seq), "hardware_flops", "tokens and seq are finite numbers, got %s and %s", tostring(tokens), tostring(seq))
  need(recompute == nil or recompute == "none" or recompute == "selective" or recompute == "full", "hardware_flops",
    "recompute is none, selective or full, got %s", tostring(recompute))
  need(attention == nil or attention == "flash" or attention == "materialized", "hardware_flops",
    "attention is flash or materialized, got %s", tostring(attention))
  return mem.hardware_flops(m, tokens, seq, recompute, attention)
end

function plan.activation_bytes_per_layer(m, o, b, s, t, recompute, sp)
  m = model_arg("activation_bytes_per_layer", m)
  need(type(o) == "table" and is_int(o.seq), "activation_bytes_per_layer", "options need seq (a positive integer)")
  need(is_num(b) and is_num(s) and is_int(t), "activation_bytes_per_layer",
    "micro-batch and sequence are finite numbers and tp a positive integer, got %s, %s, %s", tostring(b), tostring(s), tostring(t))
  return mem.activation_bytes_per_layer(m, o, b, s, t, recompute, sp)
end

function plan.pp_bytes(m, o, c)
  m = model_arg("pp_bytes", m, { "hidden" })
  traffic_args("pp_bytes", o, c)
  need(is_int(c.pp), "pp_bytes", "layout.pp must be a positive integer, got %s", tostring(c.pp))
  return time.pp_bytes(m, o, c)
end

-- per-layer traffic: tp_bytes, ep_bytes and cp_bytes(m, o, c, layers), each needing the
-- model fields named
for name, fields in pairs({ tp_bytes = { "hidden" }, ep_bytes = { "hidden" }, cp_bytes = { "hidden", "heads" } }) do
  plan[name] = function(m, o, c, layers)
    m = model_arg(name, m, fields)
    traffic_args(name, o, c, layers, true)
    return time[name](m, o, c, layers)
  end
end

function plan.dp_bytes(o, c, psi)
  need(type(o) == "table" and type(c) == "table", "dp_bytes", "dp_bytes(options, layout, parameters per GPU)")
  need(is_int(c.dp) and (c.cp == nil or is_int(c.cp)) and (c.zero == nil or is_int(c.zero, 0))
    and (c.microbatches == nil or is_int(c.microbatches)), "dp_bytes", "layout.dp (and cp, zero, microbatches) are positive integers")
  need(is_num(psi), "dp_bytes", "parameters per GPU is a finite number, got %s", tostring(psi))
  return time.dp_bytes(o, c, psi)
end

function plan.ep_all_to_all_bytes(tokens, hidden, top_k, ep, elem_bytes, capacity_factor, experts, groups, imbalance)
  local f = "ep_all_to_all_bytes"
  need(is_num(tokens) and is_int(hidden) and is_int(ep) and is_num(elem_bytes), f,
    "(tokens, hidden, top_k, ep, elem_bytes, ...): got %s, %s, %s, %s, %s", tostring(tokens), tostring(hidden), tostring(top_k),
    tostring(ep), tostring(elem_bytes))
  need(top_k == nil or is_int(top_k), f, "top_k must be a positive integer, got %s", tostring(top_k))
  need(capacity_factor == nil or is_num(capacity_factor), f, "capacity_factor must be a finite number, got %s", tostring(capacity_factor))
  need(experts == nil or is_int(experts), f, "experts must be a positive integer, got %s", tostring(experts))
  need(groups == nil or is_int(groups), f, "groups must be a positive integer, got %s", tostring(groups))
  need(imbalance == nil or is_num(imbalance, 1), f, "imbalance must be a finite number >= 1, got %s", tostring(imbalance))
  return time.ep_all_to_all_bytes(tokens, hidden, top_k, ep, elem_bytes, capacity_factor, experts, groups, imbalance)
end

function plan.stages(L, p, v)
  local args = { L, p, v }
  for i = 1, 3 do
    local x = args[i]
    if math.type(x) ~= "integer" or x < 1 or x > 1 << 20 then
      fail("stages(layers, pp, v): argument %d must be a positive integer, got %s", i, tostring(x))
    end
  end
  return mem.stages(L, p, v)
end

return plan
