-- The public API the fuzzer calls, found by walking `lab` (so a function added tomorrow is
-- fuzzed without editing this file), with argument hints for the calls where random
-- arguments would stop at argument 1. A hint is a list of kinds (see fuzz.lua's `gen`);
-- "S*" means 0 to 4 sizes. Calls with no hint get 0 to 4 arguments of any kind.
local S = {}

-- Not called at random, each for a reason that is not "it crashes" (crashes go to
-- exclusions.lua, which must shrink to nothing):
S.not_random = {
  ["lab.dist.send"] = "point-to-point: called in matched pairs by fuzz.lua's p2p step",
  ["lab.dist.recv"] = "point-to-point: called in matched pairs by fuzz.lua's p2p step",
  ["lab.dist.isend"] = "point-to-point: called in matched pairs by fuzz.lua's p2p step",
  ["lab.dist.irecv"] = "point-to-point: called in matched pairs by fuzz.lua's p2p step",
  ["lab.breakpoint"] = "stops every rank for the stepper",
  ["lab.data.default_corpus"] = "runs find(1) over a directory tree through a shell",
  ["lab.train.run"] = "a training loop whose length is its steps= argument",
  ["lab.dist.print_ranks"] = "output only",
}

-- hints by function name ("lab.x") or method name (":x", tensor methods and objects' methods)
S.hints = {
  ["lab.tensor"] = { { "NEST", "O" }, { "NEST" } },
  ["lab.zeros"] = { { "S*", "O" }, { "SH", "O" } },
  ["lab.ones"] = { { "S*", "O" } },
  ["lab.empty"] = { { "S*", "O" } },
  ["lab.rand"] = { { "S*", "O" } },
  ["lab.randn"] = { { "S*", "O" } },
  ["lab.full"] = { { "SH", "N", "O" }, { "S", "N" } },
  ["lab.arange"] = { { "N", "N", "N", "O" }, { "S", "O" } },
  ["lab.randint"] = { { "I", "I", "SH", "O" } },
  ["lab.zeros_like"] = { { "T", "O" } },
  ["lab.ones_like"] = { { "T", "O" } },
  ["lab.empty_like"] = { { "T", "O" } },
  ["lab.manual_seed"] = { { "I" } },
  ["lab.seed_per_rank"] = { { "I" } },
  ["lab.set_rng_state"] = { { "A" } },
  ["lab.where"] = { { "T", "T", "T" } },
  ["lab.matmul"] = { { "T", "T" } },
  ["lab.cat"] = { { "L", "D" }, { "L" } },
  ["lab.stack"] = { { "L", "D" }, { "L" } },
  ["lab.embedding"] = { { "T", "T" } },
  ["lab.layer_norm"] = { { "T", "T", "T", "N" } },
  ["lab.rms_norm"] = { { "T", "T", "N" } },
  ["lab.dropout"] = { { "T", "N", "B" } },
  ["lab.cross_entropy"] = { { "T", "T", "O" } },
  ["lab.sdpa"] = { { "T", "T", "T", "O" } },
  ["lab.gelu"] = { { "T", "STR" } },
  ["lab.silu"] = { { "T" } },
  ["lab.allclose"] = { { "T", "T", "N", "N" } },
  ["lab.assert_close"] = { { "T", "T", "N", "N" } },
  ["lab.max_abs_diff"] = { { "T", "T" } },
  ["lab.load_npy"] = { { "P" } },
  ["lab.set_default_device"] = { { "STR" } },
  ["lab.set_threads"] = { { "I" } },
  ["lab.no_grad"] = { { "F" }, {} },
  ["lab.dist.all_reduce"] = { { "T", "O" }, { "T", "STR" } },
  ["lab.dist.broadcast"] = { { "T", "I" }, { "T", "O" } },
  ["lab.dist.reduce"] = { { "T", "I", "O" } },
  ["lab.dist.all_gather"] = { { "T", "O" }, { "L", "T" } },
  ["lab.dist.all_gather_into_tensor"] = { { "T", "T", "O" } },
  ["lab.dist.reduce_scatter"] = { { "T", "L", "O" } },
  ["lab.dist.reduce_scatter_tensor"] = { { "T", "T", "O" } },
  ["lab.dist.all_to_all"] = { { "L", "L", "O" } },
  ["lab.dist.all_to_all_single"] = { { "T", "T", "O" } },
  ["lab.dist.new_group"] = { { "IL" } },
  ["lab.dist.split"] = { { "I", "I" } },
  ["lab.dist.set_watchdog"] = { { "N" } },
  ["lab.dist.grid"] = { { "O" } },
  ["lab.autograd.Function"] = { { "FN" } },
  ["lab.autograd.gradcheck"] = { { "F", "L" } },
  ["lab.autograd.backward"] = { { "L", "L" }, { "T" } },
  ["lab.nn.Linear"] = { { "S", "S", "O" } },
  ["lab.nn.Embedding"] = { { "S", "S" } },
  ["lab.nn.LayerNorm"] = { { "S" } },
  ["lab.nn.RMSNorm"] = { { "S" } },
  ["lab.nn.Dropout"] = { { "N" } },
  ["lab.nn.Sequential"] = { { "M", "M" } },
  ["lab.nn.GPT"] = { { "CFG" } },
  ["lab.nn.Block"] = { { "CFG" } },
  ["lab.nn.MLP"] = { { "CFG" } },
  ["lab.nn.CausalSelfAttention"] = { { "CFG" } },
  ["lab.tp.GPT"] = { { "CFG", "O" } },
  ["lab.optim.SGD"] = { { "PARAMS", "O" } },
  ["lab.optim.AdamW"] = { { "PARAMS", "O" } },
  ["lab.optim.clip_grad_norm"] = { { "PARAMS", "N", "O" } },
  ["lab.optim.warmup_cosine"] = { { "I", "O" } },
  ["lab.ddp.wrap"] = { { "M", "O" } },
  ["lab.zero.wrap"] = { { "M", "O" } },
  ["lab.lora.apply"] = { { "M", "O" } },
  ["lab.ckpt.save"] = { { "P", "O" } },
  ["lab.ckpt.load"] = { { "P", "O" } },
  ["lab.plan.evaluate"] = { { "O", "O", "O", "O" } },
  ["lab.plan.run"] = { { "O" } },
  ["lab.plan.cli"] = { { "SL" } },
  -- tensor and object methods
  [":view"] = { { "S*" }, { "SH" } },
  [":reshape"] = { { "S*" }, { "SH" } },
  [":expand"] = { { "S*" } },
  [":narrow"] = { { "D", "I", "I" } },
  [":select"] = { { "D", "D" } },
  [":slice"] = { { "D", "I", "I", "I" } },
  [":transpose"] = { { "D", "D" } },
  [":permute"] = { { "D", "D", "D" } },
  [":unsqueeze"] = { { "D" } },
  [":squeeze"] = { { "D" }, {} },
  [":flatten"] = { { "D", "D" } },
  [":sum"] = { { "D", "B" }, { "O" }, {} },
  [":mean"] = { { "D", "B" }, {} },
  [":max"] = { { "D" }, {} },
  [":min"] = { { "D" }, {} },
  [":softmax"] = { { "D" } },
  [":log_softmax"] = { { "D" } },
  [":split"] = { { "I", "D" } },
  [":chunk"] = { { "I", "D" } },
  [":to"] = { { "DT" }, { "STR" }, { "T" } },
  [":copy_"] = { { "T" } },
  [":fill_"] = { { "N" } },
  [":clamp"] = { { "N", "N" } },
  [":clamp_"] = { { "N", "N" } },
  [":pow"] = { { "N" }, { "T" } },
  [":remainder"] = { { "N" }, { "T" } },
  [":where"] = { { "T", "T" } },
  [":register_hook"] = { { "F" } },
  [":backward"] = { { "T", "O" }, {} },
  [":matmul"] = { { "T" } },
  [":uniform_"] = { { "N", "N" } },
  [":normal_"] = { { "N", "N" } },
  [":gelu"] = { { "STR" }, {} },
  [":forward"] = { { "T", "T" }, { "T" } },
  [":__call"] = { { "T", "T" }, { "T" } },
  [":load_state_dict"] = { { "A" } },
}
for _, op in ipairs({ "add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge" }) do
  S.hints[":" .. op] = { { "T" }, { "N" } }
  S.hints[":" .. op .. "_"] = { { "T" }, { "N" } }
end

-- every function of lab, lab.<sub> and lab.<sub>.<sub> (tables that are callable count as
-- functions: the nn classes); names starting with "_" are private
function S.functions(lab)
  local out, seen = {}, {}
  local function callable(v)
    if type(v) == "function" then return true end
    local mt = getmetatable(v)
    return type(v) == "table" and type(mt) == "table" and mt.__call ~= nil
  end
  local function walk(t, prefix, depth)
    if seen[t] then return end
    seen[t] = true
    local names = {}
    for k in pairs(t) do if type(k) == "string" and k:sub(1, 1) ~= "_" then names[#names + 1] = k end end
    table.sort(names)
    for _, k in ipairs(names) do
      local v, name = t[k], prefix .. "." .. k
      if callable(v) and not S.not_random[name] then out[#out + 1] = { name = name, fn = v } end
      -- a class's own methods are called on its instances (fuzz.lua's object calls)
      if type(v) == "table" and depth < 2 and not callable(v) and rawget(v, "__index") ~= v then walk(v, name, depth + 1) end
    end
  end
  walk(lab, "lab", 0)
  return out
end

-- the method names of an object (a table or userdata), through its metatable's __index
-- chain; callable objects also get ":__call"
function S.methods(obj)
  local names, seen = {}, {}
  local mt = getmetatable(obj)
  if type(mt) ~= "table" then return names end
  if mt.__call then names[#names + 1] = "__call" end
  local t, depth = mt.__index, 0
  while type(t) == "table" and depth < 5 and not seen[t] do
    seen[t] = true
    for k, v in pairs(t) do
      if type(k) == "string" and type(v) == "function" and k:sub(1, 1) ~= "_" and k ~= "init" then
        names[#names + 1] = k
      end
    end
    local m = getmetatable(t)
    t, depth = m and m.__index, depth + 1
  end
  if mt.methods and type(mt.methods) == "table" then -- tensors keep methods here
    for k, v in pairs(mt.methods) do if type(v) == "function" then names[#names + 1] = k end end
  end
  table.sort(names)
  local uniq = {}
  for i, n in ipairs(names) do if n ~= names[i - 1] then uniq[#uniq + 1] = n end end
  return uniq
end

return S
