-- Interleaved 1F1B (virtual stages) and uneven stage splits against one rank, held
-- activations against the schedules' formulas, and a GPT trained on TP x PP x DP grids
-- (2x2x1 and 1x2x2 at 4 ranks, 1x2x1 and 2x1x1 at 2) equal to its single-rank twin in
-- every gradient and value at each of two SGD steps (through the all-gradients helper).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local E = require("equivalence")
local s, p = lab.dist.rank(), lab.dist.world()
local W, B = 8, 8

local function layers(n)
  lab.manual_seed(21)
  local ls = {}
  for _ = 1, n do
    ls[#ls + 1] = T.place(lab.nn.Linear(W, W, { dtype = "f64" }))
    ls[#ls + 1] = lab.nn.GELU()
  end
  return ls
end
lab.manual_seed(5)
local X, Y = T.place(lab.randn(B, W, { dtype = "f64" })), T.place(lab.randn(B, W, { dtype = "f64" }))
local function mse(y, t) return ((y - t) ^ 2):mean() end

-- the reference's name of a chunk's parameter: chunk-local index + the chunk's first layer
local function renamer(first)
  return function(name)
    local k, rest = name:match("^(%d+)%.(.*)$")
    return (tonumber(k) + first) .. "." .. rest
  end
end

local function run(label, chunks, firsts, opts)
  local all = layers(8)
  local ref = T.place(lab.nn.Sequential(all))
  local ropt = lab.optim.SGD(ref:parameters(), { lr = 0.1 })
  local pipe = lab.pp.Pipeline(opts.schedule == "interleaved" and chunks or chunks[1], {
    micro_batches = opts.m, schedule = opts.schedule, loss = mse, activation_shape = function(mb) return { mb, W } end })
  local opt = lab.optim.SGD(pipe:parameters(), { lr = 0.1 })
  for step = 1, 2 do
    ropt:zero_grad()
    local l_ref = mse(ref(X), Y)
    l_ref:backward()
    ropt:step()
    opt:zero_grad()
    local l = pipe:train_step(X, Y)
    opt:step()
    T.near(l, l_ref:item(), 1e-10, label .. " loss of step " .. step)
  end
  local entries = {}
  for i, c in ipairs(chunks) do
    for _, e in ipairs(E.entries(c, { rename = renamer(firsts[i]) })) do entries[#entries + 1] = e end
  end
  E.check(T, label, entries, ref, { rtol = 1e-10, atol = 1e-12 })
  return pipe
end

T.test("interleaved 1F1B, 2 virtual stages per rank: equals one rank; activations held as the formula says", function()
  local v, m = 2, 2 * p
  local pieces = lab.pp.partition(layers(8), v * p)
  local per = 16 // (v * p)
  local chunks, firsts = {}, {}
  for c = 1, v do
    chunks[c] = pieces[(c - 1) * p + s + 1]
    firsts[c] = ((c - 1) * p + s) * per
  end
  local pipe = run("interleaved", chunks, firsts, { schedule = "interleaved", m = m })
  T.eq(pipe.max_in_flight, lab.pp.max_in_flight("interleaved", p, s, m, v), "micro-batch chunks held")
  if p > 1 then
    T.raises(function() lab.pp.Pipeline(chunks, { schedule = "interleaved", micro_batches = p + 1, loss = mse,
      activation_shape = function() return {} end }) end, "multiple of the")
  end
end)

T.test("uneven stages (fewer layers first and last, as Llama 3): equals one rank", function()
  local sizes = ({ { 16 }, { 6, 10 }, nil, { 2, 6, 6, 2 } })[p]
  local stages = lab.pp.partition(layers(8), p, { sizes = sizes })
  local first = 0
  for i = 1, s do first = first + sizes[i] end
  local pipe = run("uneven", { stages[s + 1] }, { first }, { schedule = "1f1b", m = 4 })
  T.eq(pipe.max_in_flight, lab.pp.max_in_flight("1f1b", p, s, 4), "1F1B holds at most p - s")
  T.raises(function() lab.pp.partition(layers(8), p, { sizes = { 1 } }) end, "must give")
end)

-- a GPT on tp x pp x dp against one rank
local cfg = { vocab = 16, d_model = 8, n_layer = 2, n_head = 2, seq_len = 4, d_ff = 16, tied = false }
local function grid_case(tp, pp_, dp, schedule)
  T.test(string.format("GPT on tp %d x pp %d x dp %d (%s) equals its single-rank twin in every gradient and value", tp, pp_, dp, schedule), function()
    local g = lab.dist.grid { tp = tp, pp = pp_, dp = dp }
    lab.manual_seed(13)
    local twin = T.place(lab.nn.GPT(cfg))
    lab.manual_seed(13)
    local model = T.place(lab.tp.GPT(cfg, { group = g.tp_group }))
    local pieces = lab.pp.gpt_pieces(model) -- embed, 2 blocks, head
    local v = schedule == "interleaved" and 2 or 1
    local stages = lab.pp.partition(pieces, pp_ * v)
    local chunks = {}
    for c = 1, v do chunks[c] = stages[(c - 1) * pp_ + g.pp_rank + 1] end
    local Bg, m = 4 * dp, 2 * pp_
    local ids, tgt = T.place(lab.randint(0, 16, { Bg, 4 })), T.place(lab.randint(0, 16, { Bg, 4 }))
    local mine = function(t) return t:narrow(1, g.dp_rank * 4 + 1, 4):contiguous() end
    local pipe = lab.pp.Pipeline(v > 1 and chunks or chunks[1], { group = g.pp_group, micro_batches = m, schedule = schedule,
      loss = function(logits, t) return lab.tp.vocab_parallel_cross_entropy(logits, t, g.tp_group) end,
      activation_shape = function(mb) return { mb, 4, 8 } end })
    local topt = lab.optim.SGD(twin:parameters(), { lr = 0.1 })
    local opt = lab.optim.SGD(model:parameters(), { lr = 0.1 })
    for step = 1, 2 do
      topt:zero_grad()
      local _, lt = twin(ids, tgt)
      lt:backward()
      opt:zero_grad()
      local l = pipe:train_step(mine(ids), mine(tgt))
      for _, prm in ipairs(pipe:parameters()) do
        if prm.grad and dp > 1 then lab.dist.all_reduce(prm.grad, { op = "avg", group = g.dp_group }) end
      end
      local avg = lab.tensor({ l }, { dtype = "f64" })
      lab.dist.all_reduce(avg, { op = "avg", group = g.dp_group })
      T.near(avg[1], lt:item(), 1e-5, "loss of step " .. step)
      do -- every step:
        -- gradients of the parameters this rank's stages hold, reassembled over TP
        local mine_p = {}
        for _, prm in ipairs(pipe:parameters()) do mine_p[prm] = true end
        local names = {}
        for _, np in ipairs(model:named_parameters()) do names[np[1]] = mine_p[np[2]] end
        E.check(T, "step " .. step, E.entries(model, { group = g.tp_group, rename = function(n)
          return names[n] and (n:gsub("attn%.qkv_weight$", "attn.qkv.weight"):gsub("attn%.qkv_bias$", "attn.qkv.bias")) or nil
        end }),
          twin, { rtol = 1e-4, atol = 1e-6 })
      end
      topt:step()
      lab.no_grad(function() opt:step() end)
    end
  end)
end
-- A MoE GPT through the pipeline: each stage adds its MoE layers' auxiliary (load-balancing
-- and z) losses of every micro-batch to its backward, as the twin adds them to its loss. The
-- twin's capacity groups are the micro-batches (of every dp rank), so its balance loss is the
-- mean of theirs. A large aux_loss_coef makes a stage that leaves them out fail at once.
local function moe_case(pp_, dp, schedule)
  T.test(string.format("MoE GPT on pp %d x dp %d (%s): the aux losses join each stage's loss, equal to the twin", pp_, dp,
    schedule), function()
    local g = lab.dist.grid { pp = pp_, dp = dp }
    local v = schedule == "interleaved" and 2 or 1
    local m = 2 * pp_
    local function moe_cfg(groups)
      return { vocab = 16, d_model = 8, n_layer = 2 * v, n_head = 2, seq_len = 4, d_ff = 8, tied = false,
        moe = { experts = 4, top_k = 2, every = 1, groups = groups, aux_loss_coef = 0.5, z_loss_coef = 0.1 } }
    end
    lab.manual_seed(17)
    local twin = T.place(lab.nn.GPT(moe_cfg(m * dp)))
    lab.manual_seed(17)
    local model = T.place(lab.nn.GPT(moe_cfg(1)))
    local stages = lab.pp.partition(lab.pp.gpt_pieces(model), pp_ * v)
    local chunks = {}
    for c = 1, v do chunks[c] = stages[(c - 1) * pp_ + g.pp_rank + 1] end
    lab.manual_seed(18)
    local ids, tgt = T.place(lab.randint(0, 16, { m * dp, 4 })), T.place(lab.randint(0, 16, { m * dp, 4 }))
    local mine = function(t) return t:narrow(1, g.dp_rank * m + 1, m):contiguous() end
    local pipe = lab.pp.Pipeline(v > 1 and chunks or chunks[1], { group = g.pp_group, micro_batches = m, schedule = schedule,
      loss = function(logits, t) return lab.cross_entropy(logits, t) end,
      activation_shape = function(mb) return { mb, 4, 8 } end })
    local _, lt = twin(ids, tgt)
    lt:backward()
    local l = pipe:train_step(mine(ids), mine(tgt))
    for _, prm in ipairs(pipe:parameters()) do
      if prm.grad and dp > 1 then lab.dist.all_reduce(prm.grad, { op = "avg", group = g.dp_group }) end
    end
    local avg = lab.tensor({ l }, { dtype = "f64" })
    lab.dist.all_reduce(avg, { op = "avg", group = g.dp_group })
    T.near(avg[1], lt:item(), 1e-5, "the loss, aux losses included")
    local held = {}
    for _, prm in ipairs(pipe:parameters()) do held[prm] = true end
    local names = {}
    for _, np in ipairs(model:named_parameters()) do names[np[1]] = held[np[2]] end
    E.check(T, "moe pp", E.entries(model, { rename = function(n) return names[n] and n or nil end }), twin,
      { rtol = 1e-4, atol = 1e-6 })
  end)
end
if p == 4 then
  moe_case(2, 2, "1f1b")
  moe_case(4, 1, "1f1b")
elseif p == 2 then
  moe_case(2, 1, "1f1b")
  moe_case(2, 1, "interleaved")
else
  moe_case(1, 1, "1f1b")
end

if p == 4 then
  grid_case(2, 2, 1, "1f1b")
  grid_case(1, 2, 2, "1f1b")
  grid_case(1, 2, 2, "interleaved")
elseif p == 2 then
  grid_case(1, 2, 1, "1f1b")
  grid_case(2, 1, 1, "gpipe")
else
  grid_case(1, 1, 1, "1f1b")
end

T.finish()
