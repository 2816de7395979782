-- lab.moe: the MoE layer against a per-token reference (routing, gates, capacity, every
-- gradient), its losses against closed forms, and expert parallelism over the world (1, 2
-- or 4 ranks) against the single-rank twin: outputs, dropped tokens, every gradient of a
-- layer and of a whole MoE GPT, and all-to-all bytes against the planner's formula.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local r, n = lab.dist.rank(), lab.dist.world()
local world = lab.dist.world_group()

local function close(a, b, tol, what)
  local scale = math.max(1, b:abs():max():item())
  local d = lab.max_abs_diff(a, b)
  T.ok(d <= tol * scale, string.format("%s: max difference %.3g (scale %.3g)", what, d, scale))
end

-- The layer's routing and output recomputed token by token: probabilities, top-k by a
-- sort, GShard's capacity rule (first choices first, in token order, per group), each
-- chosen expert's MLP applied to the token's row alone.
local function reference(m, x)
  local N, d, E, K, G = x.shape[1], x.shape[2], m.experts, m.top_k, m.groups
  local probs = (x:matmul(m.router.weight:t())):softmax(2)
  local pl = probs:tolist()
  local choice = {}
  for t = 1, N do
    local order = {}
    for e = 1, E do order[e] = e end
    table.sort(order, function(a, b) if pl[t][a] ~= pl[t][b] then return pl[t][a] > pl[t][b] end return a < b end)
    choice[t] = { table.unpack(order, 1, K) }
  end
  local kept, dropped = {}, {}
  local Ng = N // G
  local C = m.capacity_factor and math.ceil(m.capacity_factor * Ng * K / E) or math.huge
  for g = 1, G do
    local used = {}
    for j = 1, K do
      for t = (g - 1) * Ng + 1, g * Ng do
        local e = choice[t][j]
        used[e] = (used[e] or 0) + 1
        kept[(t - 1) * K + j] = used[e] <= C
        if used[e] > C then dropped[#dropped + 1] = (t - 1) * K + (j - 1) end
      end
    end
  end
  local rows = {}
  for t = 1, N do
    local xt = x:narrow(1, t, 1)
    local y
    for j = 1, K do
      local e = choice[t][j]
      local gate = probs:narrow(1, t, 1):narrow(2, e, 1)
      if m.normalize and K > 1 then
        local s
        for i = 1, K do
          local p = probs:narrow(1, t, 1):narrow(2, choice[t][i], 1)
          s = s and s + p or p
        end
        gate = gate / s
      end
      if kept[(t - 1) * K + j] then
        local h = xt:matmul(m.fc.weight:select(1, e))
        if m.fc.bias then h = h + m.fc.bias:select(1, e) end
        if m.activation == "swiglu" then h = h:silu() * xt:matmul(m.up.weight:select(1, e))
        else h = lab.gelu(h, { approximate = "tanh" }) end
        local o = h:matmul(m.proj.weight:select(1, e))
        if m.proj.bias then o = o + m.proj.bias:select(1, e) end
        y = y and y + o * gate or o * gate
      end
    end
    rows[t] = y or T.place(lab.zeros(1, d))
  end
  return lab.cat(rows, 1), dropped
end

local function params_of(m)
  local out = {}
  for _, np in ipairs(m:named_parameters()) do out[#out + 1] = np end
  return out
end

local function zero_grads(m) for _, p in ipairs(m:parameters()) do p.grad = nil end end

for _, case in ipairs({
  { top_k = 1, activation = "gelu" }, { top_k = 2, activation = "gelu" },
  { top_k = 1, activation = "swiglu", capacity_factor = 1.0 }, { top_k = 2, activation = "gelu", capacity_factor = 0.5, groups = 2 },
  { top_k = 2, activation = "swiglu", capacity_factor = 1.25 },
}) do
  local name = string.format("top-%d %s capacity %s: output, dropped tokens and every gradient equal a per-token reference",
    case.top_k, case.activation, tostring(case.capacity_factor))
  T.test(name, function()
    lab.manual_seed(3)
    local m = T.place(lab.moe.MoE(6, { experts = 4, top_k = case.top_k, activation = case.activation, d_ff = 10,
      capacity_factor = case.capacity_factor, groups = case.groups }))
    local x = T.place(lab.randn(12, 6)):requires_grad_()
    local w = T.place(lab.randn(12, 6))
    local y = m(x)
    ;(y * w):sum():backward()
    local got = {}
    for _, np in ipairs(params_of(m)) do got[np[1]] = np[2].grad:clone() end
    local gx = x.grad:clone()
    local dropped = m.dropped_slots
    zero_grads(m); x.grad = nil
    local yr, dr = reference(m, x)
    ;(yr * w):sum():backward()
    close(y, yr, 1e-5, "output")
    T.eq(table.concat(dropped, ","), table.concat(dr, ","), "dropped slots")
    if case.capacity_factor == 0.5 then T.ok(#dr > 0, "capacity 0.5 drops something") end
    close(gx, x.grad, 1e-5, "x.grad")
    for _, np in ipairs(params_of(m)) do close(got[np[1]], np[2].grad, 1e-5, np[1] .. ".grad") end
  end)
end

T.test("aux and z losses: closed forms for a uniform router and for a given routing", function()
  local m = T.place(lab.moe.MoE(4, { experts = 4, top_k = 1 }))
  lab.no_grad(function() m.router.weight:zero_() end)
  m(T.place(lab.randn(8, 4)))
  -- uniform probabilities: every token picks expert 1 (ties go low): f = (1,0,0,0), P = 1/4
  T.near(m.aux_loss:item(), 1.0, 1e-6, "aux = E * 1 * 1/E")
  T.near(m.z_loss:item(), math.log(4) ^ 2, 1e-6, "z = log(E)^2")
  T.eq(m.stats.tokens_per_expert[1], 8)
  T.near(m.stats.imbalance, 4, 1e-12, "max/mean = 8 / 2")
  -- a random router: E * sum f_i P_i from the probabilities directly
  lab.manual_seed(5)
  local m2 = T.place(lab.moe.MoE(4, { experts = 4, top_k = 2 }))
  local x = T.place(lab.randn(10, 4))
  m2(x)
  local p = x:matmul(m2.router.weight:t()):softmax(2):tolist()
  local f, P = { 0, 0, 0, 0 }, { 0, 0, 0, 0 }
  for t = 1, 10 do
    local a, b = 1, nil
    for e = 2, 4 do if p[t][e] > p[t][a] then a = e end end
    for e = 1, 4 do if e ~= a and (not b or p[t][e] > p[t][b]) then b = e end end
    f[a], f[b] = f[a] + 1 / 20, f[b] + 1 / 20
    for e = 1, 4 do P[e] = P[e] + p[t][e] / 10 end
  end
  local want = 0
  for e = 1, 4 do want = want + 4 * f[e] * P[e] end
  T.near(m2.aux_loss:item(), want, 1e-5, "aux loss")
end)

T.test("mistakes are named", function()
  if n > 1 then T.raises(function() T.place(lab.moe.MoE(4, { experts = 3, group = world })) end, "3 experts do not split evenly over the " .. n) end
  T.raises(function() T.place(lab.moe.MoE(4, { experts = 4, top_k = 5 })) end, "top_k must be an integer in 1..4")
  T.raises(function() T.place(lab.moe.MoE(4, { experts = 4, capacity_factor = 0 })) end, "capacity_factor")
  T.raises(function() T.place(lab.moe.MoE(4, { experts = 4, activation = "relu" })) end, "'gelu' or 'swiglu'")
  T.raises(function() T.place(lab.moe.MoE(4, { experts = 4, groups = 3 }))(T.place(lab.randn(4, 4))) end, "4 tokens do not split into 3")
end)

-- ---- expert parallelism over the world vs the single-rank twin ----

-- the twin sees every rank's tokens with one capacity group per rank; the EP layer sees its own
local function ep_pair(opts)
  lab.manual_seed(11)
  local full = T.place(lab.moe.MoE(6, setmetatable({ groups = n }, { __index = opts })))
  local ep = T.place(lab.moe.MoE(6, setmetatable({ group = world }, { __index = opts })))
  lab.moe.copy_from_full(ep, full)
  return full, ep
end

-- every parameter's value and gradient, expert slices gathered over the EP group, against
-- the twin through the all-gradients helper
local E = require("equivalence")
local function check_every_grad(ep_model, full, what, ep_group)
  local entries = {}
  ep_group = ep_group or world
  local function whole(p, t)
    if not lab.moe.expert_slices[p] or ep_group:size() == 1 then return t end
    return lab.cat(lab.dist.all_gather(t:contiguous(), { group = ep_group }), 1)
  end
  for _, np in ipairs(ep_model:named_parameters()) do
    local p = np[2]
    entries[#entries + 1] = { name = np[1], value = whole(p, p:detach()), grad = p.grad and whole(p, p.grad) or nil }
  end
  E.check(T, what, entries, full, { rtol = 1e-4, atol = 1e-6 })
end

for _, opts in ipairs({
  { experts = 4, top_k = 2, d_ff = 8 },
  { experts = 4, top_k = 1, d_ff = 8, activation = "swiglu" },
  { experts = 4, top_k = 2, d_ff = 8, capacity_factor = 0.75 },
}) do
  T.test(string.format("EP=%d layer (top-%d, capacity %s) equals its twin: outputs, dropped set, every gradient", n,
    opts.top_k, tostring(opts.capacity_factor)), function()
    local full, ep = ep_pair(opts)
    local Nl = 8
    local X = T.place(lab.randn(n * Nl, 6))
    local W = T.place(lab.randn(n * Nl, 6))
    local xf = X:clone():requires_grad_()
    local yf = full(xf)
    local lf = (yf * W):sum() / (n * Nl) + full.aux_loss * 0.1 + full.z_loss * 0.01
    lf:backward()
    local xl = X:narrow(1, r * Nl + 1, Nl):clone():requires_grad_()
    local yl = ep(xl)
    local ll = (yl * W:narrow(1, r * Nl + 1, Nl)):sum() / Nl + ep.aux_loss * 0.1 + ep.z_loss * 0.01
    ll:backward()
    lab.moe.sync_gradients(ep, { dp_group = world })
    close(yl, yf:narrow(1, r * Nl + 1, Nl), 1e-5, "output")
    close(xl.grad / n, xf.grad:narrow(1, r * Nl + 1, Nl), 1e-5, "input grad")
    check_every_grad(ep, full, "EP layer")
    -- the twin's drops in group r are this rank's drops (slot numbers are group-local + offset)
    local mine = {}
    for _, s in ipairs(full.dropped_slots) do
      local tok = s // opts.top_k
      if tok // Nl == r then mine[#mine + 1] = s - r * Nl * opts.top_k end
    end
    T.eq(table.concat(ep.dropped_slots, ","), table.concat(mine, ","), "dropped set")
    if opts.capacity_factor then T.ok(#full.dropped_slots > 0, "something dropped") end
    local st = lab.moe.stats(ep, { group = world })
    local sf = lab.moe.stats(full)
    T.eq(table.concat(st.layers[1].tokens_per_expert, ","), table.concat(sf.layers[1].tokens_per_expert, ","), "tokens per expert")
    T.eq(st.dropped, sf.dropped, "dropped count")
  end)
end

-- Router collapse: a zero router makes every probability equal and every token pick expert 1
-- (ties go low), so under EP the ranks holding the other experts receive no rows from any
-- rank. Their experts must still join the backward all-to-alls (the old code built their
-- output as a fresh lab.zeros(0, d) outside the graph and deadlocked) and get zero gradients,
-- and the layer must train as its twin does for a few AdamW steps.
for _, k in ipairs({ 1, 2 }) do
  T.test(string.format("EP=%d: every token routed to expert 1 (top-%d, no capacity) trains as its twin", n, k), function()
    local full, ep = ep_pair({ experts = 4, top_k = k, d_ff = 8 })
    lab.no_grad(function() full.router.weight:zero_(); ep.router.weight:zero_() end)
    local Nl = 4
    local X, W = T.place(lab.randn(n * Nl, 6)), T.place(lab.randn(n * Nl, 6))
    local xl, wl = X:narrow(1, r * Nl + 1, Nl):contiguous(), W:narrow(1, r * Nl + 1, Nl):contiguous()
    local of = lab.optim.AdamW(full:parameters(), { lr = 1e-2 })
    local oe = lab.optim.AdamW(ep:parameters(), { lr = 1e-2 })
    for step = 1, 3 do
      of:zero_grad(); oe:zero_grad()
      ;((full(X) * W):sum() / (n * Nl) + full.aux_loss * 0.1):backward()
      ;((ep(xl) * wl):sum() / Nl + ep.aux_loss * 0.1):backward()
      lab.moe.sync_gradients(ep, { dp_group = world })
      if step == 1 then
        T.eq(full.stats.tokens_per_expert[1], n * Nl, "step 1: every token chose expert 1")
        check_every_grad(ep, full, "collapsed routing, step 1")
      end
      of:step(); oe:step()
    end
    check_every_grad(ep, full, "collapsed routing, after 3 steps")
  end)
end

local function gpt_cfg(moe)
  return { vocab = 16, d_model = 8, n_layer = 2, n_head = 2, seq_len = 4, d_ff = 12, moe = moe }
end

T.test(string.format("EP=%d MoE GPT (no drop) equals its single-rank twin in outputs and every gradient", n), function()
  lab.manual_seed(21)
  local full = T.place(lab.nn.GPT(gpt_cfg({ experts = 4, top_k = 2, every = 1, groups = n })))
  local ep = T.place(lab.nn.GPT(gpt_cfg({ experts = 4, top_k = 2, every = 1, group = world })))
  lab.moe.copy_from_full(ep, full)
  local b = 2
  local ids = T.place(lab.randint(0, 16, { n * b, 4 }))
  local tgt = T.place(lab.randint(0, 16, { n * b, 4 }))
  local lf = select(2, full(ids, tgt))
  lf:backward()
  local mine = ids:narrow(1, r * b + 1, b):contiguous()
  local ll = select(2, ep(mine, tgt:narrow(1, r * b + 1, b):contiguous()))
  ll:backward()
  lab.moe.sync_gradients(ep, { dp_group = world })
  local avg = lab.tensor({ ll:item() }, { dtype = "f64" })
  lab.dist.all_reduce(avg, { op = "avg" })
  T.near(avg[1], lf:item(), 1e-5, "mean loss over ranks equals the twin's loss")
  check_every_grad(ep, full, "EP GPT")
end)

T.test("EP x DP (grid ep=2 at 4 ranks): MoE GPT with dropping equals its twin in every gradient", function()
  if n ~= 4 then return end
  local g = lab.dist.grid { ep = 2 }
  lab.manual_seed(41)
  local moe_opts = { experts = 4, top_k = 2, every = 1, capacity_factor = 1.0, activation = "swiglu" }
  local full = T.place(lab.nn.GPT(gpt_cfg(setmetatable({ groups = n }, { __index = moe_opts }))))
  local ep = T.place(lab.nn.GPT(gpt_cfg(setmetatable({ group = g.ep_group }, { __index = moe_opts }))))
  lab.moe.copy_from_full(ep, full)
  local ids = T.place(lab.randint(0, 16, { n * 2, 4 }))
  local tgt = T.place(lab.randint(0, 16, { n * 2, 4 }))
  select(2, full(ids, tgt)):backward()
  select(2, ep(ids:narrow(1, r * 2 + 1, 2):contiguous(), tgt:narrow(1, r * 2 + 1, 2):contiguous())):backward()
  lab.moe.sync_gradients(ep, { dp_group = g.dp_group, expert_dp_group = g.edp_group })
  local st = lab.moe.stats(ep, { group = g.dp_group })
  T.ok(st.dropped > 0, "capacity 1.0 dropped tokens")
  T.eq(st.dropped, lab.moe.stats(full).dropped, "dropped count equals the twin's")
  check_every_grad(ep, full, "EP2 x DP", g.ep_group)
end)

T.test("TP2 x EP2 (dp 2) at 4 ranks: TP dense layers, MoE experts over EP, equal the twin in every gradient", function()
  if n ~= 4 then return end
  local g = lab.dist.grid { tp = 2, ep = 2 }
  local cfg = gpt_cfg({ experts = 4, top_k = 2, every = 1, capacity_factor = 1.0, groups = 2 })
  cfg.tied = false
  lab.manual_seed(51)
  local full = T.place(lab.nn.GPT(cfg))
  local pcfg = gpt_cfg({ experts = 4, top_k = 2, every = 1, capacity_factor = 1.0, group = g.ep_group })
  pcfg.tied = false
  lab.manual_seed(51)
  local model = T.place(lab.tp.GPT(pcfg, { group = g.tp_group }))
  local function rename(name) return (name:gsub("attn%.qkv_weight$", "attn.qkv.weight"):gsub("attn%.qkv_bias$", "attn.qkv.bias")) end
  lab.moe.copy_from_full(model, full, { tp_group = g.tp_group, rename = rename })
  local ids = T.place(lab.randint(0, 16, { 4, 4 }))
  local tgt = T.place(lab.randint(0, 16, { 4, 4 }))
  select(2, full(ids, tgt)):backward()
  local mine = function(t) return t:narrow(1, g.dp_rank * 2 + 1, 2):contiguous() end
  select(2, model(mine(ids), mine(tgt))):backward()
  lab.moe.sync_gradients(model, { dp_group = g.dp_group, expert_dp_group = g.edp_group })
  local entries = {}
  for _, np in ipairs(model:named_parameters()) do
    local name, p = np[1], np[2]
    local function whole(t)
      if lab.moe.expert_slices[p] then return lab.cat(lab.dist.all_gather(t:contiguous(), { group = g.ep_group }), 1) end
      return E.unsplit(t, p, g.tp_group)
    end
    entries[#entries + 1] = { name = rename(name),
      value = whole(p:detach()), grad = p.grad and whole(p.grad) or nil }
  end
  E.check(T, "TP2 x EP2", entries, full, { rtol = 1e-4, atol = 1e-6 })
end)

T.test("flops_per_token counts the top_k experts a token runs, not all of them", function()
  lab.manual_seed(1)
  local dense = T.place(lab.nn.GPT(gpt_cfg(nil)))
  local m = T.place(lab.nn.GPT(gpt_cfg({ experts = 4, top_k = 1, every = 1, d_ff = 12 })))
  -- one GELU expert has the dense MLP's shapes; the router adds d_model x experts per layer
  T.eq(m:flops_per_token() - dense:flops_per_token(), 6 * 2 * 8 * 4, "only the routers differ")
end)

T.test("measured all-to-all bytes equal the planner's formula (capacity 1.25, top-2)", function()
  lab.manual_seed(31)
  local ep = T.place(lab.nn.GPT(gpt_cfg({ experts = 4, top_k = 2, every = 2, capacity_factor = 1.25, group = world })))
  local ids = T.place(lab.randint(0, 16, { 3, 4 }))
  lab.dist.reset_stats()
  local _, loss = ep(ids, ids)
  loss:backward()
  local layers = lab.moe.layers(ep)
  T.eq(#layers, 1, "every=2 puts one MoE layer in 2 blocks")
  local st = lab.dist.stats().world
  local measured = st and st.all_to_all_single and st.all_to_all_single.wire_bytes or 0
  local want = 4 * lab.moe.all_to_all_bytes(layers[1], 12, 4)
  T.eq(measured, math.floor(want + 0.5), "wire bytes of dispatch + combine, forward + backward")
  if n > 1 then T.ok(measured > 0, "bytes were sent") end
  -- without padding the planner's uniform estimate is tokens x top_k rows: C rounds up from it
  T.ok(want >= 4 * lab.plan.ep_all_to_all_bytes(12, 8, 2, n, 4), "padded volume is at least the uniform one")
end)

T.finish()
