-- model:generate: greedy decoding equals the argmax of the forward pass taken step by step
-- (computed here in plain Lua), top_k = 1 and temperature -> 0 are greedy, a seed reproduces
-- a sample, sampled frequencies follow softmax(logits / T) restricted to the top k, the
-- tensor-parallel GPT generates what the plain one does, and mistakes are named.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
-- models of a few thousand parameters: one thread does their ops faster than two, and
-- OpenMP's spinning waits make two threads ~30x slower on a loaded machine (measured: a
-- forward of this file's GPT took 59 ms with 2 threads under load, 2 ms with 1)
lab.set_threads(1)
local rank = lab.dist.rank()

local cfg = { vocab = 12, d_model = 16, n_layer = 2, n_head = 4, seq_len = 8, tied = false }
local function gpt()
  lab.manual_seed(11)
  local m = T.place(lab.nn.GPT(cfg))
  -- larger output weights than GPT-2's init, so the logits of a random model are spread
  -- out enough to make sampling differ visibly from the argmax
  lab.no_grad(function() m.head.weight:mul_(40) end)
  return m:eval()
end
local prompt = T.place(lab.tensor({ { 1, 2, 10, 3, 4, 11 }, { 5, 9, 10, 0, 7, 11 }, { 3, 3, 10, 8, 1, 11 } }))

-- the index (0-based) of the largest value of a Lua list, and softmax of a list, in plain Lua
local function lua_argmax(row)
  local best = 1
  for i = 2, #row do if row[i] > row[best] then best = i end end
  return best - 1
end

T.test("greedy decoding is the argmax of the forward pass, step by step (past seq_len too)", function()
  local m = gpt()
  local n = 5 -- 6 + 5 tokens: the last steps read only the latest seq_len = 8
  local out = m:generate(prompt, { max_new_tokens = n, greedy = true })
  T.eq(out.shape[1], 3) T.eq(out.shape[2], 6 + n, "prompt then n new tokens")
  T.eq(out.dtype, "i64")
  local seqs = prompt:tolist()
  for _ = 1, n do
    for b, seq in ipairs(seqs) do
      local ctx = {}
      for i = math.max(1, #seq - cfg.seq_len + 1), #seq do ctx[#ctx + 1] = seq[i] end
      local logits = lab.no_grad(function() return m(T.place(lab.tensor({ ctx }))) end):tolist()[1]
      seq[#seq + 1] = lua_argmax(logits[#ctx])
    end
  end
  T.values(out, seqs, 0, "every token of every row")
  -- the prompt comes back unchanged
  T.eq(lab.max_abs_diff(out:narrow(2, 1, 6), prompt), 0)
end)

T.test("top_k = 1 and temperature -> 0 are greedy; higher temperatures are not", function()
  local m = gpt()
  local greedy = m:generate(prompt, { max_new_tokens = 4, greedy = true })
  lab.manual_seed(3)
  T.eq(lab.max_abs_diff(m:generate(prompt, { max_new_tokens = 4, top_k = 1, temperature = 5 }), greedy), 0, "top_k = 1")
  lab.manual_seed(3)
  T.eq(lab.max_abs_diff(m:generate(prompt, { max_new_tokens = 4, temperature = 1e-6 }), greedy), 0, "T = 1e-6")
  -- 20 samples of 4 tokens at T = 2: some token differs from the argmax
  lab.manual_seed(4)
  local many = prompt:narrow(1, 1, 1):expand(20, 6):contiguous()
  local s = m:generate(many, { max_new_tokens = 4, temperature = 2 })
  local differs = s:ne(greedy:narrow(1, 1, 1):expand(20, 10)):to("i64"):sum():item()
  T.ok(differs > 0, "sampling at T = 2 leaves the argmax somewhere")
end)

T.test("a seed reproduces a sample; another seed gives another", function()
  local m = gpt()
  local opts = { max_new_tokens = 6, temperature = 1.5, top_k = 5 }
  lab.manual_seed(42)
  local a = m:generate(prompt, opts)
  lab.manual_seed(42)
  local b = m:generate(prompt, opts)
  lab.manual_seed(43)
  local c = m:generate(prompt, opts)
  T.eq(lab.max_abs_diff(a, b), 0, "same seed, same tokens")
  T.ok(lab.max_abs_diff(a, c) > 0, "another seed, other tokens")
end)

T.test("sampled frequencies follow softmax(logits / T) over the top k", function()
  local m = gpt()
  local ctx = prompt:narrow(1, 2, 1)
  local logits = lab.no_grad(function() return m(ctx) end):tolist()[1][6]
  local temp, k, N = 1.3, 4, 3000
  -- the expected distribution in plain Lua: the k largest logits, exp((l - max) / T), normalised
  local order = {}
  for i = 1, #logits do order[i] = i end
  table.sort(order, function(x, y) return logits[x] > logits[y] end)
  local p, z = {}, 0
  for i = 1, #logits do p[i] = 0 end
  for j = 1, k do
    local i = order[j]
    p[i] = math.exp((logits[i] - logits[order[1]]) / temp)
    z = z + p[i]
  end
  for i = 1, #p do p[i] = p[i] / z end
  lab.manual_seed(100 + rank)
  local draws = m:generate(ctx:expand(N, 6):contiguous(), { max_new_tokens = 1, temperature = temp, top_k = k })
  local counts = {}
  for i = 1, #logits do counts[i] = 0 end
  for _, row in ipairs(draws:narrow(2, 7, 1):tolist()) do counts[row[1] + 1] = counts[row[1] + 1] + 1 end
  for i = 1, #logits do
    local f, sd = counts[i] / N, math.sqrt(p[i] * (1 - p[i]) / N)
    if p[i] == 0 then T.eq(counts[i], 0, "token " .. (i - 1) .. " outside the top k is never drawn")
    else T.ok(math.abs(f - p[i]) < 5 * sd + 1e-3, string.format("token %d: frequency %.4f, probability %.4f", i - 1, f, p[i])) end
  end
  T.ok(p[order[k]] > 0.02, "the test's k-th token is likely enough to be seen")
end)

T.test("the tensor-parallel GPT generates what the plain GPT does", function()
  lab.manual_seed(11)
  local tp = T.place(lab.tp.GPT(cfg, { group = lab.dist.world_group() }))
  lab.manual_seed(11)
  local plain = T.place(lab.nn.GPT(cfg))
  tp:eval() plain:eval()
  local g_tp = tp:generate(prompt, { max_new_tokens = 4, greedy = true })
  T.eq(lab.max_abs_diff(g_tp, plain:generate(prompt, { max_new_tokens = 4, greedy = true })), 0, "greedy")
  lab.manual_seed(5)
  local s_tp = tp:generate(prompt, { max_new_tokens = 4, temperature = 0.7 })
  lab.manual_seed(5)
  T.eq(lab.max_abs_diff(s_tp, plain:generate(prompt, { max_new_tokens = 4, temperature = 0.7 })), 0, "sampled")
  -- through a DDP wrapper too
  local wrapped = lab.ddp.wrap(gpt())
  T.eq(lab.max_abs_diff(lab.generate(wrapped, prompt, { max_new_tokens = 2, greedy = true }),
    gpt():generate(prompt, { max_new_tokens = 2, greedy = true })), 0, "DDP-wrapped")
end)

T.test("mistakes are named with the op, the values and the rank", function()
  local m = gpt()
  local pre = string.format("rank %d: generate:", rank)
  T.raises(function() m:generate(prompt, { max_new_tokens = -1 }) end, pre, "max_new_tokens", "-1")
  T.raises(function() m:generate(prompt, { max_new_tokens = 2.5 }) end, pre, "max_new_tokens", "2.5")
  T.raises(function() m:generate(prompt) end, pre, "max_new_tokens", "nil")
  T.raises(function() m:generate(prompt, { max_new_tokens = 2, temperature = 0 }) end, pre, "temperature", "greedy=true")
  T.raises(function() m:generate(prompt, { max_new_tokens = 2, temperature = -1 }) end, pre, "temperature", "-1")
  T.raises(function() m:generate(prompt, { max_new_tokens = 2, top_k = 0 }) end, pre, "top_k", "[1, 12]", "got 0")
  T.raises(function() m:generate(prompt, { max_new_tokens = 2, top_k = 13 }) end, pre, "top_k", "got 13")
  T.raises(function() m:generate(prompt, { max_new_tokens = 2, greedy = true, top_k = 3 }) end, pre, "greedy", "top_k")
  T.raises(function() m:generate(prompt, { max_new_tokens = 2, greedy = "yes" }) end, pre, "greedy", "yes")
  T.raises(function() m:generate(prompt, { max_tokens = 2 }) end, pre, "unknown option max_tokens")
  T.raises(function() m:generate(prompt, 2) end, pre, "options must be a table")
  T.raises(function() m:generate(T.place(lab.tensor({ 1, 2 })), { max_new_tokens = 1 }) end, pre, "[B, T]", "shape [2]")
  T.raises(function() m:generate(lab.zeros(2, 3), { max_new_tokens = 1 }) end, pre, "integer token ids", "f32")
  T.raises(function() m:generate(T.place(lab.tensor({ { 1, 12 } })), { max_new_tokens = 1 }) end, pre, "[0, 12)", "to 12")
  T.raises(function() m:generate(T.place(lab.tensor({ { -1, 2 } })), { max_new_tokens = 1 }) end, pre, "from -1")
  T.raises(function() m:generate("1 2 3", { max_new_tokens = 1 }) end, pre, "tensor of token ids", "string")
end)

T.finish()
