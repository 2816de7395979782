-- lab.moe: a mixture-of-experts MLP (Switch Transformer, GShard) with expert parallelism.
--
-- A router (a linear map to E logits) scores every token; softmax turns the scores into
-- probabilities and each token goes to its top-k experts (k = 1: Switch, k = 2: GShard),
-- weighted by its gate (the probability, renormalised over the k chosen when k > 1).
--   capacity    With capacity_factor = c each expert takes at most C = ceil(c * N * k / E)
--               tokens of a group of N; the rest are dropped (they skip the MLP and pass
--               through the residual only). First choices are placed before second ones,
--               in token order, as GShard does. Without a capacity factor nothing drops.
--   groups      Capacity is counted per group of tokens (GShard's G). Under expert
--               parallelism each rank's tokens are its own groups, so a single-rank model
--               with groups = EP x groups drops exactly the tokens the EP model drops.
--   losses      Switch's load-balancing loss E * sum_i f_i P_i (f_i: share of the routed
--               token slots that chose expert i, P_i: mean router probability of expert
--               i), per group and averaged; the router z-loss mean(logsumexp(logits)^2)
--               (ST-MoE). Each layer keeps them in layer.aux_loss / layer.z_loss after a
--               forward; lab.nn.GPT adds coef x each to its loss.
--   experts     E MLPs (GELU, or SwiGLU as Mixtral) held as stacked weights [E, in, out]
--               so that, with capacity, all experts run as one batched matmul.
-- Expert parallelism (opts.group, an EP process group of P ranks): each rank holds E/P
-- experts; tokens travel to their experts' rank and back with all_to_all_single
-- (padded [E, C, d] blocks with capacity, exact uneven splits without), both
-- differentiable. Dense parameters stay replicated: sync_gradients averages them over the
-- data-parallel ranks and averages expert gradients over the expert-data-parallel group.
local errors = require("lab.errors")
local replicas = require("lab.replicas")
local moe = {}
local nn = lab.nn

local function rank_error(fmt, ...)
  error(string.format("rank %d: " .. fmt, lab.dist.rank(), ...), 0)
end

-- which parameters are a slice of experts: param -> {first = 0-based expert, count, total}
moe.expert_slices = setmetatable({}, { __mode = "k" })

-- E stacked linear maps: weight [E, n_in, n_out], bias [E, 1, n_out]; x @ weight + bias
local ExpertLinear = nn.class("ExpertLinear")
moe.ExpertLinear = ExpertLinear
function ExpertLinear:init(n_experts, n_in, n_out, opts)
  opts = errors.sizes("ExpertLinear", opts, n_experts, "experts", n_in, "in features", n_out, "out features")
  local bound = 1 / math.sqrt(n_in)
  self:param("weight", lab.empty(n_experts, n_in, n_out):uniform_(-bound, bound))
  if opts.bias ~= false then self:param("bias", lab.zeros(n_experts, 1, n_out)) end
  local slice = { first = opts.first or 0, count = n_experts, total = opts.total or n_experts }
  moe.expert_slices[self.weight] = slice
  if self.bias then moe.expert_slices[self.bias] = slice end
end
function ExpertLinear:describe() return string.format("%d experts, %d -> %d", self.weight.shape[1], self.weight.shape[2], self.weight.shape[3]) end
-- x [El, R, in] -> [El, R, out] for all experts at once; with e (1-based), x [R, in] for one
function ExpertLinear:forward(x, e)
  local w, b = self.weight, self.bias
  if e then w, b = w:select(1, e), b and b:select(1, e) end
  local y = x:matmul(w)
  if b then y = y + b end
  return y
end

local MoE = nn.class("MoE")
moe.MoE = MoE

-- d_model; opts: experts, top_k (1), capacity_factor (nil: no dropping), d_ff (4 d_model),
-- activation ("gelu" | "swiglu"), groups (1), normalize (top_k > 1), group (EP group),
-- aux_loss_coef (0.01), z_loss_coef (0.001)
function MoE:init(d_model, opts)
  opts = errors.sizes("MoE", opts, d_model, "d_model")
  local E, k = opts.experts, opts.top_k or 1
  if math.type(E) ~= "integer" or E < 1 then rank_error("MoE: experts must be a positive integer, got %s", tostring(E)) end
  if math.type(k) ~= "integer" or k < 1 or k > E then rank_error("MoE: top_k must be an integer in 1..%d (experts), got %s", E, tostring(k)) end
  local cf = opts.capacity_factor
  if cf ~= nil and (type(cf) ~= "number" or cf <= 0) then rank_error("MoE: capacity_factor must be a positive number or nil (no dropping), got %s", tostring(cf)) end
  local act = opts.activation or "gelu"
  if act ~= "gelu" and act ~= "swiglu" then rank_error("MoE: activation must be 'gelu' or 'swiglu', got %s", tostring(act)) end
  self.d_model, self.experts, self.top_k, self.capacity_factor, self.activation = d_model, E, k, cf, act
  self.groups = opts.groups or 1
  self.normalize = opts.normalize
  if self.normalize == nil then self.normalize = k > 1 end
  self.aux_loss_coef, self.z_loss_coef = opts.aux_loss_coef or 0.01, opts.z_loss_coef or 0.001
  self.group = opts.group
  local P, me = 1, 0
  if self.group then P, me = self.group:size(), self.group:rank() end
  if E % P ~= 0 then rank_error("MoE: %d experts do not split evenly over the %d ranks of the expert-parallel group", E, P) end
  self.ep, self.ep_rank, self.local_experts = P, me, E // P
  local El, f = E // P, opts.d_ff or 4 * d_model
  local shard = { first = me * El, total = E }
  self:add("router", nn.Linear(d_model, E, { bias = false }))
  self:add("fc", ExpertLinear(El, d_model, f, { bias = act == "gelu", first = shard.first, total = E }))
  if act == "swiglu" then self:add("up", ExpertLinear(El, d_model, f, { bias = false, first = shard.first, total = E })) end
  self:add("proj", ExpertLinear(El, f, d_model, { bias = act == "gelu", first = shard.first, total = E }))
  replicas.register(self, "lab.moe.MoE", MoE._reset)
end

function MoE:describe()
  return string.format("%d experts (%d here), top-%d, %s, capacity %s", self.experts, self.local_experts, self.top_k,
    self.activation, self.capacity_factor and tostring(self.capacity_factor) or "no drop")
end

-- elements of the expert weights this rank holds (local_experts experts)
function MoE:expert_parameters()
  local n = 0
  for _, name in ipairs({ "fc", "up", "proj" }) do -- up: SwiGLU only
    if self[name] then for _, p in ipairs(self[name]:parameters()) do n = n + p:numel() end end
  end
  return n
end

-- the expert MLP on rows of one expert (e given) or on [El, R, d] for all
function MoE:ffn(x, e)
  if self.activation == "swiglu" then
    return self.proj(self.fc(x, e):silu() * self.up(x, e), e)
  end
  return self.proj(lab.gelu(self.fc(x, e), { approximate = "tanh" }), e)
end

-- ---- routing (bookkeeping on plain numbers: which token goes where) ----

-- top-k of each row of probs (a Lua list of lists): experts (1-based) in order of
-- preference, ties to the lower index as argmax
local function top_k(probs, k)
  local out = {}
  for t, row in ipairs(probs) do
    local chosen, taken = {}, {}
    for j = 1, k do
      local best, bv = nil, -math.huge
      for e, p in ipairs(row) do
        if not taken[e] and p > bv then best, bv = e, p end
      end
      chosen[j], taken[best] = best, true
    end
    out[t] = chosen
  end
  return out
end

local function one_hot(idx, E, device) -- idx: list of 1-based experts -> [N, E] f32 on device
  local rows = {}
  for t, e in ipairs(idx) do
    local r = {}
    for j = 1, E do r[j] = 0 end
    r[e] = 1
    rows[t] = r
  end
  return lab.tensor(rows, { dtype = "f32", device = device })
end

-- ids for lab.embedding (0-based; the index `zero` names an appended row of zeros), on the
-- device of the rows they index
local function ids(list, device) return lab.tensor(list, { dtype = "i64", device = device }) end

-- ---- forward ----

-- x [..., d] -> [..., d]
-- after a step cut short (lab.replicas): no losses or stats of a forward that did not finish
function MoE:_reset()
  self.aux_loss, self.z_loss, self.stats, self.dropped_slots = nil, nil, nil, {}
end

function MoE:forward(x)
  replicas.touch(self)
  local shape = x.shape
  local d = shape[#shape]
  local flat = x:reshape(-1, d)
  local N, E, K, G = flat.shape[1], self.experts, self.top_k, self.groups
  if N % G ~= 0 then rank_error("MoE: %d tokens do not split into %d capacity groups", N, G) end
  local Ng = N // G

  local logits = self.router(flat) -- [N, E]
  local probs = logits:softmax(2)
  local choice = top_k(probs:tolist(), K) -- routing itself is not differentiable
  local gates, onehots = {}, {}
  for j = 1, K do
    local col = {}
    for t = 1, N do col[t] = choice[t][j] end
    onehots[j] = one_hot(col, E, probs.device)
    gates[j] = (probs * onehots[j]):sum(2) -- [N], differentiable through probs
  end
  if self.normalize and K > 1 then
    local total = gates[1]
    for j = 2, K do total = total + gates[j] end
    for j = 1, K do gates[j] = gates[j] / total end
  end

  -- per group: tokens per expert (before dropping) for the aux loss and the stats
  local counts, group_counts = {}, {}
  for e = 1, E do counts[e] = 0 end
  for g = 1, G do
    local c = {}
    for e = 1, E do c[e] = 0 end
    for t = (g - 1) * Ng + 1, g * Ng do
      for j = 1, K do c[choice[t][j]] = c[choice[t][j]] + 1 end
    end
    for e = 1, E do counts[e] = counts[e] + c[e] end
    group_counts[g] = c
  end

  local y, dropped
  if self.capacity_factor then
    y, dropped = self:dispatch_padded(flat, choice, gates)
  else
    y, dropped = self:dispatch_sorted(flat, choice, gates, counts)
  end

  -- losses: Switch's E * sum_i f_i P_i per group (mean), and the z-loss
  local f = {}
  for g = 1, G do
    f[g] = {}
    for e = 1, E do f[g][e] = group_counts[g][e] / (Ng * K) end
  end
  local P = probs:view(G, Ng, E):mean(2) -- [G, E]
  self.aux_loss = (P * lab.tensor(f, { dtype = "f32", device = P.device })):sum() * (E / G)
  local m = logits:detach():max(2, true)
  local lse = (logits - m):exp():sum(2):log() + m:view(N)
  self.z_loss = (lse * lse):mean()

  local mx, total = 0, 0
  for e = 1, E do mx, total = math.max(mx, counts[e]), total + counts[e] end
  self.stats = { tokens_per_expert = counts, dropped = dropped, routed = N * K, tokens = N,
    imbalance = total > 0 and mx / (total / E) or 0, aux_loss = self.aux_loss:item(), z_loss = self.z_loss:item() }
  return y:view(shape)
end

-- the weighted sum over k of the expert outputs gathered for each token
local function combine(out_rows, slot_of, gates, N, d)
  local zero = out_rows.shape[1]
  local padded = lab.cat({ out_rows, lab.zeros(1, d, { dtype = out_rows.dtype, device = out_rows.device }) }, 1)
  local y
  for j = 1, #gates do
    local s = {}
    for t = 1, N do s[t] = slot_of[t][j] or zero end
    local term = lab.embedding(ids(s, padded.device), padded) * gates[j]:view(N, 1)
    y = y and y + term or term
  end
  return y
end

-- With capacity: buffers [G, E, C, d] (empty slots are zeros), experts as one batched
-- matmul; under EP every rank sends every other an equal block (even all-to-all).
function MoE:dispatch_padded(x, choice, gates)
  local N, d, E, K, G = x.shape[1], self.d_model, self.experts, self.top_k, self.groups
  local Ng = N // G
  local C = math.ceil(self.capacity_factor * Ng * K / E)
  local src, slot_of, dropped = {}, {}, 0
  self.dropped_slots = {} -- token * top_k + choice (0-based) of every slot that found no room
  local zero = N -- index of the zero row appended to x
  for i = 1, G * E * C do src[i] = zero end
  for t = 1, N do slot_of[t] = {} end
  for g = 1, G do
    local fill = {}
    for e = 1, E do fill[e] = 0 end
    for j = 1, K do -- first choices before second ones
      for t = (g - 1) * Ng + 1, g * Ng do
        local e = choice[t][j]
        if fill[e] < C then
          local slot = ((g - 1) * E + (e - 1)) * C + fill[e] -- 0-based row of [G, E, C]
          fill[e] = fill[e] + 1
          src[slot + 1], slot_of[t][j] = t - 1, slot
        else
          dropped = dropped + 1
          self.dropped_slots[#self.dropped_slots + 1] = (t - 1) * K + (j - 1)
        end
      end
    end
  end
  self.capacity = C
  local xin = lab.embedding(ids(src, x.device), lab.cat({ x, lab.zeros(1, d, { dtype = x.dtype, device = x.device }) }, 1)) -- [G*E*C, d]
  local P, El = self.ep, self.local_experts
  -- [G, P, El, C, d] -> [P, G, El, C, d]: the block for rank p is contiguous
  local send = xin:view(G, P, El, C, d):permute(2, 1, 3, 4, 5):contiguous():view(P * G * El * C, d)
  local recv = P > 1 and lab.autograd.dist.all_to_all_single(send, { group = self.group }) or send
  -- [P(source), G, El, C, d] -> [El, P, G, C, d]: each local expert's rows together
  local h = recv:view(P, G, El, C, d):permute(3, 1, 2, 4, 5):contiguous():view(El, P * G * C, d)
  local out = self:ffn(h)
  local back = out:view(El, P, G, C, d):permute(2, 3, 1, 4, 5):contiguous():view(P * G * El * C, d)
  local ret = P > 1 and lab.autograd.dist.all_to_all_single(back, { group = self.group }) or back
  -- [P(owner), G, El, C, d] -> [G, E, C, d], the layout slot numbers refer to
  local rows = ret:view(P, G, El, C, d):permute(2, 1, 3, 4, 5):contiguous():view(G * E * C, d)
  return combine(rows, slot_of, gates, N, d), dropped
end

-- Without capacity: every routed slot is processed. Rows are sorted by expert; under EP
-- each rank sends each other exactly its rows (uneven all-to-all, split sizes exchanged
-- first as counts).
function MoE:dispatch_sorted(x, choice, gates, counts)
  local N, d, E, K = x.shape[1], self.d_model, self.experts, self.top_k
  local P, El = self.ep, self.local_experts
  local start, src, slot_of = {}, {}, {}
  local acc = 0
  for e = 1, E do start[e], acc = acc, acc + counts[e] end
  local fill = {}
  for e = 1, E do fill[e] = 0 end
  for t = 1, N do
    slot_of[t] = {}
    for j = 1, K do
      local e = choice[t][j]
      local slot = start[e] + fill[e]
      fill[e] = fill[e] + 1
      src[slot + 1], slot_of[t][j] = t - 1, slot
    end
  end
  self.dropped_slots = {}
  local xin = lab.embedding(ids(src, x.device), x) -- [N*K, d], expert-major
  local recv, recv_counts, in_splits, out_splits = xin, { counts }, nil, nil
  if P > 1 then
    -- how many rows every rank sends each of my experts: an all-to-all of the counts
    local mine = lab.tensor(counts, { dtype = "i64" })
    local theirs = lab.zeros(E, { dtype = "i64" })
    lab.dist.all_to_all_single(theirs, mine, { group = self.group })
    local tl = theirs:tolist()
    in_splits, out_splits, recv_counts = {}, {}, {}
    for p = 1, P do
      local s_in, s_out, rc = 0, 0, {}
      for e = 1, El do
        s_in = s_in + counts[(p - 1) * El + e]
        rc[e] = tl[(p - 1) * El + e]
        s_out = s_out + rc[e]
      end
      in_splits[p], out_splits[p], recv_counts[p] = s_in, s_out, rc
    end
    recv = lab.autograd.dist.all_to_all_single(xin, { input_split_sizes = in_splits, output_split_sizes = out_splits, group = self.group })
  end
  -- rows arrive ordered (source rank, expert, token); each expert's rows are taken
  -- together (source rank, token), computed, and put back in arrival order
  local offset, o = {}, 0
  for p = 1, #recv_counts do
    offset[p] = {}
    for e = 1, El do offset[p][e], o = o, o + recv_counts[p][e] end
  end
  -- An expert that received no rows still runs, on zero rows taken from recv: the output
  -- stays in the graph, so a rank whose experts got nothing joins the backward all-to-alls
  -- the others enter (a fresh zeros(0, d) deadlocked them), and its experts' gradients are
  -- zeros, as the single-rank twin's slices of them are.
  local outs, order, total = {}, {}, 0
  for e = 1, El do
    local rows = {}
    for p = 1, #recv_counts do
      for i = 0, recv_counts[p][e] - 1 do rows[#rows + 1] = offset[p][e] + i end
    end
    outs[e] = self:ffn(lab.embedding(ids(rows, recv.device), recv), e)
    for _, r in ipairs(rows) do total = total + 1; order[r + 1] = total - 1 end
  end
  local computed = lab.cat(outs, 1)
  local arrived = lab.embedding(ids(order, computed.device), computed)
  local back = arrived
  if P > 1 then
    back = lab.autograd.dist.all_to_all_single(arrived, { input_split_sizes = out_splits, output_split_sizes = in_splits, group = self.group })
  end
  return combine(back, slot_of, gates, N, d), 0
end

-- ---- models ----

-- the MoE layers of a model, in registration order
function moe.layers(model)
  errors.module("lab.moe.layers", 1, model)
  local out = {}
  local function walk(m)
    if getmetatable(m) == MoE then out[#out + 1] = m return end
    for _, c in ipairs(m:children()) do walk(c) end
  end
  walk(model)
  return out
end

-- coef-weighted aux and z losses of every MoE layer after a forward (nil if none)
function moe.aux_total(model)
  local total
  for _, l in ipairs(moe.layers(model)) do
    if l.aux_loss then
      local t = l.aux_loss * l.aux_loss_coef + l.z_loss * l.z_loss_coef
      total = total and total + t or t
    end
  end
  return total
end

-- The last step's routing, summed over the model's MoE layers (and over `group`'s ranks
-- when given): tokens per expert per layer, dropped, imbalance max/mean, aux loss (mean).
function moe.stats(model, opts)
  opts = errors.with_opts("lab.moe.stats", errors.module, opts, model)
  local out = { layers = {}, dropped = 0, routed = 0 }
  for i, l in ipairs(moe.layers(model)) do
    local s = l.stats
    if not s then rank_error("moe.stats: layer %d has not run a forward yet", i) end
    local v = {}
    for e = 1, l.experts do v[e] = s.tokens_per_expert[e] end
    v[#v + 1], v[#v + 2], v[#v + 3] = s.dropped, s.routed, s.aux_loss
    local t = lab.tensor(v, { dtype = "f64" })
    if opts.group then lab.dist.all_reduce(t, { group = opts.group }) end
    local n = opts.group and opts.group:size() or 1
    local r = t:tolist()
    local tpe, mx, sum = {}, 0, 0
    for e = 1, l.experts do tpe[e] = math.floor(r[e] + 0.5); mx = math.max(mx, tpe[e]); sum = sum + tpe[e] end
    local layer = { tokens_per_expert = tpe, dropped = math.floor(r[l.experts + 1] + 0.5),
      routed = math.floor(r[l.experts + 2] + 0.5), aux_loss = r[l.experts + 3] / n,
      imbalance = sum > 0 and mx / (sum / l.experts) or 0 }
    out.layers[i] = layer
    out.dropped, out.routed = out.dropped + layer.dropped, out.routed + layer.routed
  end
  out.drop_rate = out.routed > 0 and out.dropped / out.routed or 0
  return out
end

-- Copies a full (single-rank) model's values into a model with expert parallelism: dense
-- parameters as they are, expert parameters narrowed to this rank's experts, tensor-
-- parallel ones (Megatron's marks) narrowed to this rank's slice of tp_group.
-- opts: tp_group, rename(name) -> the full model's name.
function moe.copy_from_full(model, full, opts)
  opts = errors.with_opts("lab.moe.copy_from_full", errors.module, opts, model, full)
  local src = {}
  for _, np in ipairs(full:named_parameters()) do src[np[1]] = np[2] end
  lab.no_grad(function()
    for _, np in ipairs(model:named_parameters()) do
      local name, p = np[1], np[2]
      local f = src[opts.rename and opts.rename(name) or name]
      if not f then rank_error("moe.copy_from_full: the full model has no parameter %s", name) end
      p:copy_(moe.slice_of(p, f, opts.tp_group))
    end
  end)
end

-- the part of a full model's tensor t that parameter p holds: this rank's experts, or its
-- tensor-parallel slice over tp_group (stride k: k blocks, each split over the ranks)
function moe.slice_of(p, t, tp_group)
  errors.tensor("lab.moe.slice_of", 1, p)
  errors.tensor("lab.moe.slice_of", 2, t)
  errors.group("lab.moe.slice_of", 3, tp_group)
  local s = moe.expert_slices[p]
  if s and s.count ~= t.shape[1] then return t:narrow(1, s.first + 1, s.count) end
  if p.tensor_model_parallel and tp_group and tp_group:size() > 1 then
    local dim, k, n, r = p.partition_dim, p.partition_stride or 1, tp_group:size(), tp_group:rank()
    local len = t.shape[dim] // (k * n)
    local parts = {}
    for j = 0, k - 1 do parts[#parts + 1] = t:narrow(dim, j * (t.shape[dim] // k) + r * len + 1, len) end
    return k == 1 and parts[1] or lab.cat(parts, dim)
  end
  return t
end

-- After backward under EP x DP: dense gradients averaged over dp_group (every rank that
-- holds a replica: EP ranks included), expert gradients summed over expert_dp_group (the
-- ranks holding the same experts) and divided by the number of dp_group ranks, since each
-- expert saw the tokens of every EP rank. Either group may be nil (size 1).
function moe.sync_gradients(model, opts)
  opts = errors.with_opts("lab.moe.sync_gradients", errors.module, opts, model)
  errors.group("lab.moe.sync_gradients", 2, opts.dp_group, "opts.dp_group: a process group")
  errors.group("lab.moe.sync_gradients", 2, opts.expert_dp_group, "opts.expert_dp_group: a process group")
  local dp = opts.dp_group and opts.dp_group:size() or 1
  for _, p in ipairs(model:parameters()) do
    local g = p.grad
    if g then
      if moe.expert_slices[p] then
        if opts.expert_dp_group and opts.expert_dp_group:size() > 1 then lab.dist.all_reduce(g, { group = opts.expert_dp_group }) end
        if dp > 1 then g:div_(dp) end
      elseif dp > 1 then
        lab.dist.all_reduce(g, { op = "avg", group = opts.dp_group })
      end
    end
  end
end

-- Bytes one rank sends per all-to-all with capacity (the padded buffers), through the
-- planner's formula: tokens x top_k x capacity_factor rows of d_model, (P-1)/P of them
-- leaving the rank.
function moe.all_to_all_bytes(layer, tokens, elem_bytes)
  errors.arg(getmetatable(layer) == MoE, "lab.moe.all_to_all_bytes", 1, "a MoE layer", layer)
  return lab.plan.ep_all_to_all_bytes(tokens, layer.d_model, layer.top_k, layer.ep, elem_bytes or 4,
    layer.capacity_factor, layer.experts, layer.groups)
end

return moe
